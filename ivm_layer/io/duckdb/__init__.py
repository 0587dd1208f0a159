"""DuckDB: capture of a session's writes in O(changed rows).

- :mod:`.capture`   what a write changed: ``RETURNING`` lists, bulk results, fingerprints, table diffs
- :mod:`.preimage`  an ``UPDATE`` read without running it: the ``SELECT`` of the rows it will change
- :mod:`.upserts`   an upsert read without running it: the rows it may replace
"""

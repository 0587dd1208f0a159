"""The outside systems, one folder each, both directions in it.

- :mod:`.duckdb`   DuckDB: change capture of a session's writes in O(changed rows) (``RETURNING``,
  ``UPDATE`` pre-images, upserts), reading SQL text without running it.
- :mod:`.postgres` PostgreSQL: connection targets, logical replication (publications, slots,
  snapshot ``COPY``), the sans-I/O ``pgoutput`` decoder, the change feed, snapshot slices and
  binary ``COPY``.

Nothing here maintains a view: a backend supplies capture and catalog; :mod:`ivm_layer.maintain`
applies the changes.
"""

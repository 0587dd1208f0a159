"""DuckDB sessions: ``ivm_layer.connect()`` on a DuckDB file or in memory.

- :mod:`.session`  the :class:`~.session.Session` and ``connect``
- :mod:`.views`    the incremental views of a session: creation, loading, the catalog, stopping
- :mod:`.writes`   writes to tracked tables: capture, apply to the views, undo
- :mod:`.reads`    reads of served views as lazy Arrow readers, without copying them
- :mod:`.tables`   view rows written into DuckDB tables (materialized views)
"""

"""PostgreSQL sessions: logical replication is the capture (one
:class:`ivm_layer.io.postgres.feed.ChangeFeed` per view, applied through the view's
:class:`ivm_layer.maintain.viewset.ViewSet`).

- :mod:`.session`  :class:`~.session.PostgresSession` and ``connect_postgres``
- :mod:`.views`    the lifecycle of a view: catalog, claim of its slot, creation, resume, drop
- :mod:`.compile`  a view definition compiled against PostgreSQL's catalog
- :mod:`.apply`    a view's stream applied: engine, materialized table, progress, checkpoint
- :mod:`.served`   non-materialized views served to PostgreSQL queries in O(change) per read
- :mod:`.user`     the user's connection: statements, COPY, reconnection
- :mod:`.state`    the session's context, per-view state, names and errors
- :mod:`.watch`    lag, sources dropped or replaced behind the session's back
- :mod:`.drop`     ``DROP`` statements that concern views
"""

"""``ivm serve``: incremental views over the PostgreSQL v3 wire protocol.

- :mod:`.messages`, :mod:`.codec` — the protocol as pure functions (sans-I/O), fuzzed;
- :mod:`.pgtypes` — DuckDB types → PostgreSQL OIDs, text and binary encodings;
- :mod:`.server`, :mod:`.connection`, :mod:`.outbox`, :mod:`.protocol` — the asyncio
  listener, one task and one worker thread per connection, back-pressure, the query protocols;
- :mod:`.auth` — trust on loopback, SCRAM-SHA-256, TLS;
- :mod:`.embedded`, :mod:`.duckclient` — one DuckDB session shared by many clients (the gate,
  per-client connections, transactions applied at COMMIT); :mod:`.proxy` — a PostgreSQL behind;
- :mod:`.catalog`, :mod:`.pgcompat`, :mod:`.settings`, :mod:`.commands` — what clients probe
  (``pg_catalog``, ``SHOW``/``SET``, ``version()``) and the view extras (``SHOW INCREMENTAL
  VIEWS``, ``EXPLAIN INCREMENTAL VIEW``, ``SUBSCRIBE``: :mod:`.subscribe`);
- :mod:`.metrics` — Prometheus ``/metrics``.

Start it with ``ivm serve DATABASE``; :func:`.cli.main` parses the arguments.
"""

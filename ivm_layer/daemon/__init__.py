"""The CDC daemon: PostgreSQL change streams through Apache Spark into incremental views and sinks.

Spark does ingestion, batching, offsets, checkpoints and scale-out; the engine
(:mod:`ivm_layer.engine`) does the incremental maintenance.

- :mod:`.config`      the daemon's settings (command line and TOML)
- :mod:`.spark`       a SparkSession tuned for small machines (UI, ``--conf``, driver address)
- :mod:`.source`      the ``ivm-cdc`` Spark Python Data Source (offsets = LSNs)
- :mod:`.state`       the engine state (base rows + views) and its checkpoint store
- :mod:`.sinks`       idempotent per-batch-id sinks: PostgreSQL, DuckDB, Parquet, console
- :mod:`.rowdigest`   the sink tables' row keys, 128-bit digests computed a column at a time
- :mod:`.sinkwriter`  the sinks written on a background thread beside the next batch
- :mod:`.shares`      the Shares/HyperCube choice over a view's join variables (pure Python)
- :mod:`.routing`     a view's rows to shards by those shares (per table occurrence)
- :mod:`.routingplan` the plan recorded with a sharded checkpoint; ``--explain``
- :mod:`.shardsource` ``ivm-cdc-shards``: one input partition per shard, the shard engines
- :mod:`.shards`      the sharded query's writer: the shards' changes merged into the sinks
- :mod:`.runner`      the streaming query: one engine in the driver, or shards in state
- :mod:`.status`      the status file a running daemon rewrites every batch
- :mod:`.commitmark`  the marker of the last batch the sinks hold (what the slot may confirm)
- :mod:`.listener`    a StreamingQueryListener: Spark's progress reports into the status file
- :mod:`.metrics`     ``--metrics-port``: Prometheus text
- :mod:`.hygiene`     slots and publications of discarded checkpoints
- :mod:`.cli`         ``ivm daemon``

PostgreSQL's side (the change feed, snapshot slices, binary COPY) is in :mod:`ivm_layer.io.postgres`.
Importing this package does not import pyspark; the modules that need it import it lazily.
"""

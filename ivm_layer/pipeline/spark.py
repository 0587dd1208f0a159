"""A SparkSession for the daemon, tuned for small machines and loopback-only networking.

UI off, few shuffle partitions, driver bound to 127.0.0.1 (``SPARK_LOCAL_IP`` too), Python
workers running the current interpreter (``PYSPARK_PYTHON``), RocksDB state store with
changelog checkpointing (used by ``--shards N``), session time zone UTC. The ``ivm-cdc``
data source is registered on the returned session.
"""

from __future__ import annotations

import os
import sys


def prepare_environment(local_ip: str = "127.0.0.1") -> None:
    """Environment the JVM and the Python workers inherit: run this before the first session."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", local_ip)
    # workers import ivm_layer and connectors from the same checkout/installation
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)


def build_session(master: str = "local[*]", app_name: str = "ivm-daemon", shuffle_partitions: int = 1,
                  log_level: str = "WARN", extra: dict | None = None):
    """Get or create the SparkSession (see the module docstring for the settings)."""
    prepare_environment()
    from pyspark.sql import SparkSession

    host = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.bindAddress": host,
        "spark.driver.host": host,
        "spark.sql.shuffle.partitions": str(max(1, shuffle_partitions)),
        "spark.default.parallelism": str(max(1, shuffle_partitions)),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.streaming.stateStore.providerClass":
            "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        "spark.executorEnv.SPARK_LOCAL_IP": host,
        **({"spark.executorEnv.PGAPPNAME": os.environ["PGAPPNAME"]} if "PGAPPNAME" in os.environ else {}),
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    }
    conf.update(extra or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    from .source import register

    register(spark)
    return spark

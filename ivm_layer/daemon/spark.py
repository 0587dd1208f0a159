"""A SparkSession for the daemon, tuned for small machines.

The Spark UI on (``spark.ui.port``, Spark's 4040 unless set; off with ``--no-ui``), few
shuffle partitions, Python workers running the current interpreter (``PYSPARK_PYTHON``),
session time zone UTC. The driver advertises and binds the address given (``--driver-host``,
``--driver-bind-address``); by default, with a ``local`` or ``spark://`` master, 127.0.0.1
(``SPARK_LOCAL_IP`` if set), and on YARN/Kubernetes Spark's own choice (the host's name).
Settings passed with ``--conf`` (and the flags that set one, ``--driver-memory`` …) override
the daemon's. No state store is configured: the daemon runs no stateful Spark operator (the
engines keep their own state, :mod:`.state`, :mod:`.shardsource`). The ``ivm-cdc`` data
source is registered on the returned session.

The driver JVM starts fast (:func:`driver_java_options`): the client compiler only
(``-XX:TieredStopAtLevel=1``: the driver runs short planning code, and C2 compile threads
compete with everything else on a small machine), the serial collector (a small heap), and
an application class-data-sharing archive of Spark's classes, written by the first run's JVM
at its exit into a private cache directory and mapped by later runs. Measured on a loaded
2-core machine (session build + first Python worker job): 26–34 s plain, 10.5 s with these.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys


def prepare_environment(local_ip: str | None = "127.0.0.1") -> None:
    """Environment the JVM and the Python workers inherit: run this before the first session.
    ``local_ip``: the address Spark binds (``SPARK_LOCAL_IP``; None: leave it to Spark)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if local_ip:
        os.environ["SPARK_LOCAL_IP"] = local_ip
    # workers import ivm_layer and connectors from the same checkout/installation
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root] + paths)


def cds_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ivm-layer", "spark-cds")


def _private_dir(path: str) -> bool:
    """``path`` exists (created 0700 if missing), is ours and only we can write it."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _archive_key() -> str:
    """Spark's version, the java binary and the jars: an archive only fits the same ones."""
    import shutil

    import pyspark

    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") \
        else shutil.which("java") or "java"
    java = os.path.realpath(java)
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    h = hashlib.sha1(pyspark.__version__.encode())
    for item in [java, os.path.realpath(jars)] + sorted(os.listdir(jars) if os.path.isdir(jars) else []):
        h.update(item.encode())
    try:
        h.update(str(os.stat(java).st_mtime_ns).encode())
    except OSError:
        pass
    return h.hexdigest()[:16]


def driver_java_options() -> str:
    """JVM flags for a fast driver start (see the module docstring); set
    ``IVM_SPARK_FAST_START=0`` to start the JVM with Spark's defaults."""
    if os.environ.get("IVM_SPARK_FAST_START", "1") == "0":
        return ""
    opts = ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]
    d = cds_dir()
    if not _private_dir(d):
        return " ".join(opts)
    final = os.path.join(d, f"spark-{_archive_key()}.jsa")
    # adopt an archive an earlier (now finished) run wrote; the archives of other finished
    # runs that started at the same time (about 170 MB each) would never be used: removed
    for n in sorted(os.listdir(d)):
        tmp = os.path.join(d, n)
        if n.startswith(os.path.basename(final) + ".") and n.endswith(".tmp") and not _pid_alive(n):
            try:
                if os.path.isfile(final):
                    os.remove(tmp)
                else:
                    os.replace(tmp, final)
            except OSError:
                pass
    if os.path.isfile(final) and os.stat(final).st_uid == os.getuid():
        opts.append(f"-XX:SharedArchiveFile={final}")
    else:
        opts.append(f"-XX:ArchiveClassesAtExit={final}.{os.getpid()}.tmp")
    return " ".join(opts)


def _pid_alive(name: str) -> bool:
    try:
        pid = int(name.rsplit(".", 2)[-2])
        os.kill(pid, 0)
        return True
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        return True


def driver_addresses(master: str, host: str | None = None, bind: str | None = None) -> tuple[str | None, str | None]:
    """The driver's ``(advertised host, bind address)``: as given, else ``SPARK_LOCAL_IP`` or
    127.0.0.1 for a ``local``/``spark://`` master, else None (Spark's own choice)."""
    if host is None and bind is None and master.startswith(("local", "spark://")):
        host = os.environ.get("SPARK_LOCAL_IP") or "127.0.0.1"
    return host, bind or host


def _loopback(address: str) -> bool:
    return address == "localhost" or address.startswith("127.") or address == "::1"


def build_session(master: str = "local[*]", app_name: str = "ivm-daemon", shuffle_partitions: int = 1,
                  log_level: str = "WARN", extra: dict | None = None, driver_host: str | None = None,
                  bind_address: str | None = None):
    """Get or create the SparkSession (see the module docstring for the settings); ``extra``:
    Spark settings over the daemon's."""
    host, bind = driver_addresses(master, driver_host, bind_address)
    prepare_environment(bind)
    from pyspark.sql import SparkSession

    conf = {
        "spark.ui.enabled": "true",
        "spark.ui.showConsoleProgress": "false",
        **({"spark.driver.bindAddress": bind} if bind else {}),
        **({"spark.driver.host": host} if host else {}),
        "spark.sql.shuffle.partitions": str(max(1, shuffle_partitions)),
        "spark.default.parallelism": str(max(1, shuffle_partitions)),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
        # a loopback driver has its executors on the same machine: they bind loopback too
        **({"spark.executorEnv.SPARK_LOCAL_IP": bind} if bind and _loopback(bind) else {}),
        **({"spark.executorEnv.PGAPPNAME": os.environ["PGAPPNAME"]} if "PGAPPNAME" in os.environ else {}),
        "spark.python.worker.reuse": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
    }
    java_opts = driver_java_options()
    if java_opts:
        conf["spark.driver.extraJavaOptions"] = java_opts
    conf.update(extra or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    from .source import register

    register(spark)
    return spark

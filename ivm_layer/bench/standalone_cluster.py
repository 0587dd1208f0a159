"""A Spark standalone master and one-core workers on 127.0.0.1, for measurements
(``ivm_layer/bench/daemon_measure.py --standalone``); the same set-up as the standalone test fixture.

    with standalone_cluster(workers=2) as url:   # spark://127.0.0.1:<port>
        ...
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def standalone_cluster(workers: int = 2, cores: int = 1, memory: str = "1g"):
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    tmp = tempfile.mkdtemp(prefix="ivm-standalone-")
    env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               SPARK_LOG_DIR=os.path.join(tmp, "logs"), SPARK_WORKER_DIR=os.path.join(tmp, "work"))
    port = _free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []
    master_log = os.path.join(tmp, "master.log")

    def launch(name: str, *args: str) -> None:
        with open(os.path.join(tmp, f"{name}.log"), "wb") as log:
            procs.append(subprocess.Popen([os.path.join(home, "bin", "spark-class"), *args], env=env,
                                          stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    try:
        launch("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
               "--webui-port", str(_free_port()))
        for i in range(workers):
            launch(f"worker{i}", "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                   "--cores", str(cores), "--memory", memory, "--webui-port", str(_free_port()),
                   "--work-dir", os.path.join(tmp, f"work{i}"))
        deadline = time.monotonic() + 120
        while True:   # every worker registered with the master
            with open(master_log, errors="replace") as f:
                if f.read().count("Registering worker") >= workers:
                    break
            if time.monotonic() > deadline:
                with open(master_log, errors="replace") as f:
                    tail = f.read()[-3000:]
                raise RuntimeError(f"the standalone workers did not register ({master_log}):\n{tail}")
            time.sleep(0.5)
        yield url
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)
        shutil.rmtree(tmp, ignore_errors=True)

"""Put on ``PYTHONPATH`` by the daemon tests to make Spark's first start of one Python worker
module miss Spark's fixed connect-back deadline, as on a loaded machine.

Every Python process started with this directory on its path imports this module at start-up.
A process running ``python -m $IVM_TEST_SLOW_WORKER_MODULE`` while the file
``$IVM_TEST_SLOW_WORKER_ONCE`` does not exist creates that file and sleeps
``$IVM_TEST_SLOW_WORKER_SECONDS`` before continuing (so only the first start is slow); every
other process is untouched. No part of Spark is replaced.
"""

import os
import time


def _slow_first_start() -> None:
    module = os.environ.get("IVM_TEST_SLOW_WORKER_MODULE")
    marker = os.environ.get("IVM_TEST_SLOW_WORKER_ONCE")
    if not module or not marker:
        return
    try:
        with open("/proc/self/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return
    if module.encode() not in argv:
        return
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    time.sleep(float(os.environ.get("IVM_TEST_SLOW_WORKER_SECONDS", "15")))


_slow_first_start()

"""The daemon's per-batch state writes on a local directory and on S3 (not a test): for
``--batches`` batches of ``--batch-rows`` changes, the wall seconds per batch of what the
driver writes once a batch is applied — the engine's ``log-<id>`` object, the sinks-committed
marker and the status file — and of a snapshot of ``--rows`` base rows, on: the previous
layout (one appended, fsynced ``state.log``, local only), the per-batch objects on a local
directory, and the same on S3 served by ``moto`` on loopback (started here; the dev extras
install it). Alternates the targets round by round in the same run and prints JSON with the
machine's load (``os.getloadavg``) before and after.

    python -m ivm_layer.bench.daemon_statefs [--batches 200] [--batch-rows 1000] [--rows 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..daemon.commitmark import write_marker
from ..daemon.enginestore import BatchStore
from ..daemon.statefs import StateFS
from ..daemon.status import StatusFile
from ..maintain.checkpoint import CheckpointStore


def _batches(n: int, size: int, seed: int = 1) -> list[dict]:
    rnd = random.Random(seed)
    return [{"o": {(rnd.randint(0, 10**9), rnd.randint(0, 9999), f"n{rnd.randint(0, 977)}"): 1 for _ in range(size)}}
            for _ in range(n)]


def _moto() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
                       "AWS_EC2_METADATA_DISABLED": "true"})
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.5).close()
            return proc, endpoint
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _per_batch_objects(location: str, batches: list[dict], snapshot_rows: dict) -> dict:
    fs = StateFS(location)
    fs.ensure_root()
    store = BatchStore(fs.sub("engine"))
    store.fs.ensure_root()
    store.write_snapshot({"batch": -1}, {}, -1)
    status = StatusFile(location, "bench", "local[2]", 1)
    log_s, marker_s, status_s = [], [], []
    for b, ch in enumerate(batches):
        t0 = time.perf_counter()
        store.next_source_lsn = 1000 + b
        store.append(b, ch)
        t1 = time.perf_counter()
        write_marker(fs, b, 1000 + b)
        t2 = time.perf_counter()
        status.batch(batch_id=b, rows_in=len(ch["o"]), changes_out=0, lsn=1000 + b, lsn_text="0/0", seconds=0.1)
        t3 = time.perf_counter()
        log_s.append(t1 - t0)
        marker_s.append(t2 - t1)
        status_s.append(t3 - t2)
    t = time.perf_counter()
    store.write_snapshot({"batch": len(batches) - 1}, snapshot_rows, len(batches) - 1)
    snap = time.perf_counter() - t
    t = time.perf_counter()
    BatchStore(fs.sub("engine")).load()
    load = time.perf_counter() - t
    return {"log_ms": _ms(log_s), "marker_ms": _ms(marker_s), "status_ms": _ms(status_s),
            "per_batch_total_ms": round(1000 * statistics.median(a + b + c for a, b, c in zip(log_s, marker_s, status_s)), 3),
            "snapshot_s": round(snap, 3), "snapshot_bytes": store.snapshot_bytes, "recover_snapshot_s": round(load, 3)}


def _appended_log(directory: str, batches: list[dict], snapshot_rows: dict) -> dict:
    """The previous layout: one appended, fsynced log file (local only)."""
    store = CheckpointStore(Path(directory), "state", columnar=True, sync_each=True)
    store.write_snapshot({"batch": -1}, {}, -1)
    log_s = []
    for b, ch in enumerate(batches):
        t0 = time.perf_counter()
        store.append(b, ch)
        log_s.append(time.perf_counter() - t0)
    t = time.perf_counter()
    store.write_snapshot({"batch": len(batches) - 1}, snapshot_rows, len(batches) - 1)
    snap = time.perf_counter() - t
    store.close()
    return {"log_ms": _ms(log_s), "snapshot_s": round(snap, 3), "snapshot_bytes": store.snapshot_bytes}


def _ms(xs: list[float]) -> dict:
    xs = sorted(xs)
    return {"median": round(1000 * statistics.median(xs), 3), "p90": round(1000 * xs[int(0.9 * (len(xs) - 1))], 3)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-rows", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    import boto3

    batches = _batches(args.batches, args.batch_rows)
    rnd = random.Random(2)
    snapshot_rows = {"o": {(i, rnd.randint(0, 9999), f"n{i % 977}"): 1 for i in range(args.rows)}}
    out: dict = {"batches": args.batches, "batch_rows": args.batch_rows, "snapshot_rows": args.rows,
                 "load_before": os.getloadavg(), "rounds": []}
    proc, endpoint = _moto()
    tmp = tempfile.mkdtemp(prefix="ivm-statefs-bench-")
    try:
        s3 = boto3.client("s3", endpoint_url=endpoint)
        for r in range(args.rounds):
            bucket = f"bench-{r}"
            s3.create_bucket(Bucket=bucket)
            row = {"round": r,
                   "appended_state_log_local": _appended_log(os.path.join(tmp, f"old{r}"), batches, snapshot_rows),
                   "objects_local": _per_batch_objects(os.path.join(tmp, f"new{r}"), batches, snapshot_rows),
                   "objects_s3_moto": _per_batch_objects(f"s3://{bucket}/ckpt", batches, snapshot_rows),
                   "load": os.getloadavg()}
            out["rounds"].append(row)
            print(json.dumps(row), file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(10)
        shutil.rmtree(tmp, ignore_errors=True)
    out["load_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()

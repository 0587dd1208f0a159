"""An S3 API on loopback for the daemon's state on ``s3://…``: ``moto`` in server mode, started
once per session on a free port (the dev extras install it), with throwaway credentials and
the endpoint in the environment (``AWS_ENDPOINT_URL``, read by pyarrow, boto3 and any daemon
started from the test), as a real deployment would give them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


S3_ENV = {"AWS_ACCESS_KEY_ID": "ivm-test-key", "AWS_SECRET_ACCESS_KEY": "ivm-test-secret",
          "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture(scope="session")
def s3_server():
    """``{"endpoint", "env"}`` of a moto S3 server on 127.0.0.1; the env is also set in this
    process for the session."""
    port = _free_port()
    server = os.path.join(os.path.dirname(sys.executable), "moto_server")
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    env = dict(S3_ENV, AWS_ENDPOINT_URL=endpoint)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto S3 server did not start") from None
                time.sleep(0.2)
        yield {"endpoint": endpoint, "env": env}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3_url(s3_server) -> str:
    """``s3://<fresh bucket>/ckpt`` on the moto server."""
    import boto3

    bucket = f"ivm-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=s3_server["endpoint"]).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/ckpt"

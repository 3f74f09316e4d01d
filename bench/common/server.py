"""The benchmark server: ``superchargedb serve --demo`` in a subprocess on a free loopback port,
stopped with SIGTERM (then SIGKILL). Shared by the benchmarks that go through HTTP. With
``workers`` > 1 (PostgreSQL only) it is ``serve --workers N``: ready once every API process has
said it serves, and :meth:`Server.api_pids` names them (a CPU quota is per process)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from bench.common.paths import REPO


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``superchargedb serve --demo`` in a subprocess; stopped with SIGTERM (then SIGKILL)."""

    def __init__(
        self,
        data_dir: Path,
        port: int,
        log_path: Path,
        env: dict[str, str],
        *,
        demo: bool = True,
        workers: int = 1,
    ) -> None:
        self.data_dir, self.port, self.log_path = data_dir, port, log_path
        self.url = f"http://127.0.0.1:{port}"
        self.env = env
        self.demo, self.workers = demo, workers
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 600.0) -> None:
        cmd = [
            sys.executable,
            "-m",
            "superchargedb.cli.main",
            "serve",
            "--data",
            str(self.data_dir),
            "--port",
            str(self.port),
            *(["--demo"] if self.demo else []),
            *(["--workers", str(self.workers)] if self.workers > 1 else []),
        ]
        self._log = open(self.log_path, "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env, cwd=REPO
        )
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=5.0) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(
                        f"server exited with {self.proc.returncode}:\n{self.log_tail()}"
                    )
                try:
                    if c.get(f"{self.url}/readyz").status_code == 200 and self._all_serving():
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
        raise RuntimeError(f"server not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def _all_serving(self) -> bool:
        """Every API process of ``serve --workers N`` has reported serving (the first answers
        /readyz before the others start)."""
        if self.workers == 1:
            return True
        lines = self.log_path.read_text(errors="replace").splitlines()
        return all(
            any(ln.startswith(f"API process {i} (pid ") and ln.endswith(" serving") for ln in lines)
            for i in range(self.workers)
        )

    def api_pids(self) -> list[int]:
        """The API processes: the server itself, or the children of ``serve --workers N``
        (multiprocessing's resource tracker is not one)."""
        assert self.proc is not None
        if self.workers == 1:
            return [self.proc.pid]
        kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return [
            int(c)
            for c in kids
            if b"resource_tracker" not in Path(f"/proc/{c}/cmdline").read_bytes()
        ]

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        if self.proc is not None:
            self._log.close()

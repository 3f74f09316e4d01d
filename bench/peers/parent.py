"""The parent's end of a system's child process (``python -m bench.peers --child SYSTEM``)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from bench.common.proc import child_env, module_cmd


class ChildError(RuntimeError):
    pass


class Child:
    def __init__(self, system: str, work: Path, log_dir: Path) -> None:
        self.system = system
        self.log_path = log_dir / f"{system}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed in close())
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        self.proc = subprocess.Popen(
            module_cmd("peers", "--child", system, "--work", str(work)),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=child_env(env),
        )
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(timeout=30)
            raise ChildError(f"{self.system} exited ({self.proc.returncode}):\n{self.log_tail()}")
        out: dict[str, Any] = json.loads(line)
        if not out.get("ok"):
            raise ChildError(f"{self.system}: {out.get('error')}\n{self.log_tail(15)}")
        return out

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def close(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ChildError, OSError, ValueError):
                self.call(cmd="quit")
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._log.close()

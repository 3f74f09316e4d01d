"""A warm fork server for the crash harness: import the server's modules once, fork per command.

Each crash point starts ``superchargedb serve`` two or three times and ``superchargedb audit
verify`` once; importing the package (onnxruntime, FastAPI, ...) is most of a start's CPU. This
process imports everything once while still single-threaded, then forks one child per request;
the child runs the real CLI entry point (``superchargedb.cli.main.main``) with its own argv,
environment, working directory and log file, exactly as ``python -m superchargedb.cli.main``
would after its imports.

Protocol (JSON lines): stdin ``{"id", "argv", "env", "log", "cwd"}``; stdout ``{"id", "pid"}`` once
forked and ``{"pid", "rc"}`` when the child exits (``rc`` < 0: killed by that signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import threading

import superchargedb  # noqa: F401  (onnxruntime before usearch)
import superchargedb.api.app
import superchargedb.cli.main
import superchargedb.service
import superchargedb.worker  # noqa: F401


def child(req: dict) -> None:
    """In the forked child: become the CLI process; never returns."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.environ.clear()
        os.environ.update(req["env"])
        os.chdir(req["cwd"])
        sys.argv = ["superchargedb", *req["argv"]]
        try:
            superchargedb.cli.main.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main() -> None:
    assert threading.active_count() == 1, "fork only from a single-threaded process"
    out = sys.stdout
    buf = b""
    children: set[int] = set()
    stdin = sys.stdin.fileno()
    while True:
        ready, _, _ = select.select([stdin], [], [], 0.05)
        if ready:
            data = os.read(stdin, 65536)
            if not data:  # the harness is gone: take the children with us
                for pid in children:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, 9)
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    child(req)
                children.add(pid)
                out.write(json.dumps({"id": req["id"], "pid": pid}) + "\n")
                out.flush()
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            children.discard(pid)
            out.write(json.dumps({"pid": pid, "rc": os.waitstatus_to_exitcode(status)}) + "\n")
            out.flush()


if __name__ == "__main__":
    main()

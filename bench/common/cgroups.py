"""CPU quotas and CPU accounting for benchmark processes, on cgroup v1 (the ``cpu`` and ``cpuacct``
hierarchies, mounted apart) or, where only cgroup v2 is mounted, its unified ``cpu.max``.

A :class:`CpuGroup` is one directory in each hierarchy: ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``
(v1) or ``cpu.max`` (v2) caps it, ``cpuacct.usage`` (v1, ns) or ``cpu.stat``'s ``usage_usec`` (v2)
counts the CPU of every thread in it, exited ones included, which ``/proc/<pid>/stat`` alone
cannot (a PostgreSQL backend that ended takes its CPU with it). A process is moved in by writing
its pid to ``cgroup.procs`` (all its threads go; threads and children it starts later are born
inside). Needs root (or a delegated hierarchy); :func:`available` says why not.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def _v1() -> bool:
    return (ROOT / "cpu" / "cgroup.procs").exists() and (ROOT / "cpuacct" / "cgroup.procs").exists()


def available() -> str | None:
    """None when CPU groups can be made here, else why not."""
    if not _v1() and not (ROOT / "cgroup.controllers").exists():
        return f"no cgroup v1 cpu/cpuacct hierarchies nor cgroup v2 under {ROOT}"
    probe = CpuGroup(f"scdb-probe-{os.getpid()}")
    try:
        probe.create()
    except OSError as exc:
        return f"cannot create a cgroup ({exc}): run as root"
    finally:
        probe.remove()
    return None


def parse_stat(text: str) -> dict[str, int]:
    """``cpu.stat``'s ``key value`` lines as a dict (both versions write them so)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def proc_stat_fields(raw: str) -> list[str]:
    """The fields of a ``/proc/<pid>/stat`` line after the command name, state first (the
    name may hold spaces and parentheses, so split after its last ``)``)."""
    return raw.rsplit(")", 1)[1].split()


def proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a live process (its threads included), None if gone."""
    try:
        fields = proc_stat_fields(Path(f"/proc/{pid}/stat").read_text())
    except OSError:
        return None
    # Fields 14 and 15 of stat (utime, stime), in clock ticks; index 0 here is field 3.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_pids(pgid: int) -> list[int]:
    """The live processes whose process group is ``pgid`` (a server and every child it forked)."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = proc_stat_fields((d / "stat").read_text())
        except OSError:
            continue
        if int(fields[2]) == pgid:
            out.append(int(d.name))
    return sorted(out)


class CpuGroup:
    """One cgroup (see the module doc); ``quota_cores`` None: accounting only, no cap."""

    def __init__(self, name: str, quota_cores: float | None = None) -> None:
        self.name = name
        self.quota_cores = quota_cores
        self.v1 = _v1()
        if self.v1:
            self.dirs = [ROOT / "cpu" / name, ROOT / "cpuacct" / name]
        else:
            self.dirs = [ROOT / name]

    @property
    def _cpu(self) -> Path:
        return self.dirs[0]

    def create(self) -> CpuGroup:
        for d in self.dirs:
            d.mkdir(exist_ok=True)
        if self.quota_cores is not None:
            quota = int(self.quota_cores * PERIOD_US)
            if self.v1:
                (self._cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self._cpu / "cpu.cfs_quota_us").write_text(str(quota))
            else:
                (self._cpu / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        return self

    def add(self, pid: int) -> None:
        """Move ``pid`` (all its threads) into the group, in every hierarchy."""
        for d in self.dirs:
            (d / "cgroup.procs").write_text(str(pid))

    def pids(self) -> list[int]:
        return [int(x) for x in (self.dirs[-1] / "cgroup.procs").read_text().split()]

    def usage_s(self) -> float:
        """CPU seconds used inside the group since it was made."""
        if self.v1:
            return int((self.dirs[1] / "cpuacct.usage").read_text()) / 1e9
        return parse_stat((self._cpu / "cpu.stat").read_text())["usage_usec"] / 1e6

    def throttling(self) -> dict[str, int]:
        """How often the quota stopped the group (periods, throttled periods, time)."""
        stat = parse_stat((self._cpu / "cpu.stat").read_text())
        keys = ("nr_periods", "nr_throttled", "throttled_time", "throttled_usec")
        return {k: v for k, v in stat.items() if k in keys}

    def remove(self) -> None:
        """Move what is left to the root group and delete the directories."""
        for d in self.dirs:
            if not d.exists():
                continue
            parent = d.parent / "cgroup.procs"
            with contextlib.suppress(OSError):
                for pid in (d / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        parent.write_text(pid)
            for _ in range(50):  # the kernel lets go of a group a moment after its last task
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)

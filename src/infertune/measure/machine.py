"""Was the machine busy while we measured? On a shared machine other work makes timings swing 2-5x; every
trial says whether it ran beside other work, read by the parent around the trial (never inside the timed
process), from the kernel's own counters (Linux; elsewhere only the load average):

- `others_cpu`: CPU time spent on this process's CPUs by processes other than this one and its children,
  in cores, averaged over the window: `/proc/stat` busy time of those CPUs minus our own (`getrusage`
  self + reaped children). The direct measure of contention.
- `load_average`: the 1-minute load average at the window's end (the highest of start and end).
- `steal`: the share of CPU time the hypervisor gave to other guests (`/proc/stat` steal).
- `throttled`: CPU throttling happened (cgroup `cpu.stat` nr_throttled, or thermal throttle counters).

Busy when others used more than BUSY_OTHERS of the cores, the load average minus our own share of it is
above the core count, steal is above BUSY_STEAL, or throttling happened.
"""

from __future__ import annotations

import glob
import os
import resource
import time

from pydantic import BaseModel, Field

BUSY_OTHERS = 0.15  # share of the cores others may use before timings are not to be trusted
BUSY_STEAL = 0.05


class MachineLoad(BaseModel):
    """How busy the machine was over a window (measured beside the trial, not by it)."""

    cores: int = Field(description="CPUs this process may run on")
    seconds: float = Field(description="length of the window")
    load_average: float = Field(description="1-minute load average, the highest at the window's ends")
    others_cpu: float | None = Field(None, description="cores' worth of CPU used by other processes, on average")
    steal: float | None = Field(None, description="share of CPU time stolen by the hypervisor")
    throttled: bool | None = Field(None, description="CPU throttling (cgroup quota or thermal) happened")
    busy: bool
    reasons: list[str] = Field(default_factory=list)
    windows: int = Field(1, description="trials this covers")
    busy_windows: int | None = Field(None, description="of which ran on a busy machine")


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


def _stat(cpus: list[int]) -> tuple[float, float, float] | None:
    """(busy, steal, total) jiffies over `cpus` from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    want = {f"cpu{c}" for c in cpus}
    busy = steal = total = 0.0
    for line in lines:
        parts = line.split()
        if parts and parts[0] in want:
            v = [float(x) for x in parts[1:9]]  # user nice system idle iowait irq softirq steal
            total += sum(v)
            steal += v[7]
            busy += sum(v) - v[3] - v[4] - v[7]
    return (busy, steal, total) if total else None


_forked_cpu_s = [0.0]  # CPU time of our trials that another process of ours reaped (the warm launcher's children)


def add_own_cpu(seconds: float) -> None:
    """Count a trial reaped by the warm launcher (measure/zygote.py) as ours: getrusage sees only what we reap."""
    _forked_cpu_s[0] += seconds


def _own_cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime + _forked_cpu_s[0]


def _throttle_count() -> int | None:
    paths = ["/sys/fs/cgroup/cpu.stat", "/sys/fs/cgroup/cpu/cpu.stat", "/sys/fs/cgroup/cpu,cpuacct/cpu.stat"]
    count, found = 0, False
    for p in paths:
        try:
            with open(p, encoding="ascii") as f:
                for line in f:
                    if line.startswith("nr_throttled "):
                        count += int(line.split()[1])
                        found = True
            break
        except OSError:
            continue
    for p in glob.glob("/sys/devices/system/cpu/cpu*/thermal_throttle/*_throttle_count"):
        try:
            with open(p, encoding="ascii") as f:
                count += int(f.read())
            found = True
        except (OSError, ValueError):
            continue
    return count if found else None


class Watch:
    """`with Watch() as w: ...` then `w.result`: how busy the machine was meanwhile."""

    def __init__(self) -> None:
        self.cpus = _cpus()
        self.result: MachineLoad | None = None

    def _snap(self) -> tuple:
        return time.monotonic(), _stat(self.cpus), _own_cpu_s(), os.getloadavg()[0], _throttle_count()

    def __enter__(self) -> Watch:
        self._start = self._snap()
        return self

    def __exit__(self, *exc: object) -> None:
        self.result = between(self._start, self._snap(), len(self.cpus))


def between(a: tuple, b: tuple, cores: int) -> MachineLoad:
    (t0, s0, own0, load0, thr0), (t1, s1, own1, load1, thr1) = a, b
    wall = max(t1 - t0, 1e-6)
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    others = steal = None
    own_share = (own1 - own0) / wall
    if s0 is not None and s1 is not None and s1[2] > s0[2]:
        others = max(0.0, ((s1[0] - s0[0]) / tick - (own1 - own0)) / wall)
        steal = (s1[1] - s0[1]) / (s1[2] - s0[2])
    throttled = None if thr0 is None or thr1 is None else thr1 > thr0
    load = max(load0, load1)
    reasons = []
    if others is not None and others > BUSY_OTHERS * cores:
        reasons.append(f"other processes used {others:.2f} of {cores} cores")
    if load - own_share > cores:
        reasons.append(f"load average {load:.2f} on {cores} cores")
    if steal is not None and steal > BUSY_STEAL:
        reasons.append(f"{steal:.0%} of CPU time stolen by the hypervisor")
    if throttled:
        reasons.append("the CPU was throttled")
    return MachineLoad(
        cores=cores,
        seconds=wall,
        load_average=load,
        others_cpu=others,
        steal=steal,
        throttled=throttled,
        busy=bool(reasons),
        reasons=reasons,
    )


def combine(loads: list[MachineLoad | None]) -> MachineLoad | None:
    """Several windows as one: busy when any was, with the busiest window's reasons and how many were busy."""
    got = [x for x in loads if x is not None]
    if not got:
        return None
    busy = [x for x in got if x.busy]
    worst = max(busy or got, key=lambda x: (x.others_cpu or 0, x.load_average))
    seen = [x.others_cpu for x in got if x.others_cpu is not None]
    steal = [x.steal for x in got if x.steal is not None]
    thr = [x.throttled for x in got if x.throttled is not None]
    windows = sum(x.windows for x in got)
    busy_windows = sum(x.busy_windows if x.busy_windows is not None else int(x.busy) for x in got)
    reasons = [r for r in worst.reasons if "ran on a busy machine" not in r] if busy else []
    if busy and windows > 1:
        reasons.append(f"{busy_windows} of {windows} trials ran on a busy machine")
    return MachineLoad(
        cores=got[0].cores,
        seconds=sum(x.seconds for x in got),
        load_average=max(x.load_average for x in got),
        others_cpu=max(seen) if seen else None,
        steal=max(steal) if steal else None,
        throttled=any(thr) if thr else None,
        busy=bool(busy),
        reasons=reasons,
        windows=windows,
        busy_windows=busy_windows,
    )

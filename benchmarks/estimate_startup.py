"""Start-up of `infertune estimate --model demo` on a warm cache against a bare `python -c pass`.

Warm: the demo model is prepared, its profile, this host's CPU probe and the answer itself are cached under
INFERTUNE_HOME (one unmeasured run first; the "computed" rows turn the kept answers off, so they show what a
question asked for the first time on a known model costs), and Python's bytecode caches are written (as for an installed package:
PYTHONDONTWRITEBYTECODE is cleared for the children). Commands run interleaved (A B C ... A B C ...) so a
busy machine slows them alike; the ratio of medians is the figure, the spread and the load average say how
noisy the machine was. CPU time (user + system of each child) is shown beside the wall time: a shared
machine inflates it less. Each warm verb is also checked for what it imported: neither torch nor transformers.

    python benchmarks/estimate_startup.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

INFERTUNE = [sys.executable, "-m", "infertune"]
COMPUTED = {"INFERTUNE_NO_ANSWER_CACHE": "1"}  # the answer computed from the cached profile, not replayed
VERBS = {  # name -> (command, extra environment)
    "python -c pass": ([sys.executable, "-c", "pass"], {}),
    "estimate --model demo": ([*INFERTUNE, "estimate", "--model", "demo"], {}),
    "  ... --format json": ([*INFERTUNE, "estimate", "--model", "demo", "--format", "json"], {}),
    "  ... computed (estimate)": ([*INFERTUNE, "estimate", "--model", "demo", "--format", "json"], COMPUTED),
    "profile --model demo": ([*INFERTUNE, "profile", "--model", "demo", "--format", "json"], {}),
    "  ... computed (profile)": ([*INFERTUNE, "profile", "--model", "demo", "--format", "json"], COMPUTED),
    "advise --model demo": ([*INFERTUNE, "advise", "--model", "demo", "--format", "json"], {}),
    "  ... computed (advise)": ([*INFERTUNE, "advise", "--model", "demo", "--format", "json"], COMPUTED),
}


def _env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("INFERTUNE_NO_ANSWER_CACHE", None)
    return {**env, **(extra or {})}


def _heavy_imports(cmd: list[str], extra: dict) -> list[str]:
    out = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=_env(extra), capture_output=True, text=True)
    names = {line.rsplit("|", 1)[-1].strip() for line in out.stderr.splitlines() if line.startswith("import time")}
    return sorted(names & {"torch", "transformers", "accelerate"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    for cmd, extra in VERBS.values():  # warm: profile, CPU probe and answers cached, bytecode written
        subprocess.run(cmd, env=_env(extra), capture_output=True, check=True)
    times: dict[str, list[float]] = {name: [] for name in VERBS}
    cpu: dict[str, list[float]] = {name: [] for name in VERBS}  # user + system: what a busy machine inflates least
    load_before = os.getloadavg()[0]
    for _ in range(args.repeats):
        for name, (cmd, extra) in VERBS.items():
            r, t = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
            subprocess.run(cmd, env=_env(extra), capture_output=True, check=True)
            times[name].append(time.perf_counter() - t)
            r2 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[name].append(r2.ru_utime + r2.ru_stime - r.ru_utime - r.ru_stime)
    load_after = os.getloadavg()[0]
    bare, bare_cpu = statistics.median(times["python -c pass"]), statistics.median(cpu["python -c pass"])
    print(f"{'command':<26} {'median':>8} {'min':>8} {'max':>8} {'x bare':>7} {'CPU':>7} {'x bare':>7}  heavy imports")
    for name, ts in times.items():
        med, med_cpu = statistics.median(ts), statistics.median(cpu[name])
        heavy = "" if name.startswith("python") else (", ".join(_heavy_imports(*VERBS[name])) or "none")
        row = (
            f"{med * 1e3:7.0f}ms {min(ts) * 1e3:7.0f}ms {max(ts) * 1e3:7.0f}ms {med / bare:6.1f}x "
            f"{med_cpu * 1e3:5.0f}ms {med_cpu / bare_cpu:6.1f}x"
        )
        print(f"{name:<26} {row}  {heavy}")
    print(
        f"\n{args.repeats} interleaved runs each; 1-minute load average {load_before:.1f} before, {load_after:.1f} "
        f"after, on {os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()

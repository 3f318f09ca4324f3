"""How fast `infertune doctor` answers: one file against a bare interpreter start, and a 300-file folder.

    python benchmarks/doctor_speed.py [--runs 15]

Runs A (bare `python -c pass`), B (`python -m infertune doctor FILE` answered from its findings cache, the file
unchanged since the run before), C (the same with `--no-cache`: every rule loaded and run; bytecode cached as
after `pip install`, the rules' regexes kept by doctor.patterns as after one run), D (C from a source tree under
PYTHONDONTWRITEBYTECODE=1: every module compiled each run) and E (C with INFERTUNE_NO_DOCTOR_CACHE=1: the
regexes compiled each run too), and F (C through the `infertune` command pip installed beside this Python,
when there is one: what a user types) interleaved A B C D E F A B ... in fresh processes, so a busy moment hits all; prints wall-clock and CPU
(user+sys) medians, spread and the median ratios. Then checks a folder of 300 files (the corpus shapes,
copied) a few times, with and without the findings cache. The load average before and after says how noisy the
machine was. Nothing is asserted: timing belongs here, not in tests.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "doctor" / "corpus"
ONE = ROOT / "tests" / "data" / "doctor" / "bad_server.py"


def timed(cmd: list[str], env: dict) -> tuple[float, float, int]:
    """(wall seconds, child CPU seconds, exit code) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    rc = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False).returncode
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), rc


def summary(xs: list[float]) -> str:
    q = statistics.quantiles(xs, n=4) if len(xs) > 1 else [xs[0]] * 3
    return (
        f"median {statistics.median(xs) * 1e3:6.1f} ms  (p25 {q[0] * 1e3:.1f}, p75 {q[2] * 1e3:.1f}, "
        f"min {min(xs) * 1e3:.1f}, max {max(xs) * 1e3:.1f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--folder-runs", type=int, default=3)
    args = ap.parse_args()
    py = sys.executable
    cache = tempfile.mkdtemp(prefix="pycache-")
    home = tempfile.mkdtemp(prefix="infertune-home-")  # the findings cache's own folder, empty at the start
    # installed: bytecode cached (pip compiles it at install time); here in a private cache folder
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONPYCACHEPREFIX": cache, "INFERTUNE_HOME": home}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.pop("INFERTUNE_NO_DOCTOR_CACHE", None)
    # a source tree with PYTHONDONTWRITEBYTECODE=1 (this machine's default): the doctor compiles every run
    src_env = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
    src_env.pop("PYTHONPYCACHEPREFIX", None)
    load0 = os.getloadavg()
    doc = [py, "-m", "infertune", "doctor", str(ONE)]
    rows = {  # name: (command, environment)
        "bare interpreter (python -c pass)": ([py, "-c", "pass"], env),
        "doctor, findings cached (a hit)": (doc, env),
        "doctor, --no-cache, bytecode cached": ([*doc, "--no-cache"], env),
        "doctor, --no-cache, compiled each run": ([*doc, "--no-cache"], src_env),
        # the rules' regexes compiled each run too (doctor.patterns off): what --no-cache cost before it
        "doctor, --no-cache, patterns compiled": ([*doc, "--no-cache"], {**env, "INFERTUNE_NO_DOCTOR_CACHE": "1"}),
    }
    installed = Path(py).parent / "infertune"  # the command pip wrote (its wrapper imports re), when there is one
    if installed.exists():
        rows["doctor, --no-cache, installed command"] = ([str(installed), "doctor", str(ONE), "--no-cache"], env)
    for cmd, e in rows.values():
        timed(cmd, e)  # fill the bytecode cache and the findings cache once
    times: dict[str, list[tuple[float, float, int]]] = {name: [] for name in rows}
    for _ in range(args.runs):
        for name, (cmd, e) in rows.items():
            times[name].append(timed(cmd, e))
    assert all(rc in (0, 1) for name in rows for _, _, rc in times[name][1:]), "doctor failed"
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} interleaved rounds, "
        f"load average before {load0[0]:.2f}"
    )
    for kind, at in (("wall", 0), ("cpu ", 1)):
        for name in rows:
            print(f"{name:40s} {kind} {summary([t[at] for t in times[name]])}")
    bare = times["bare interpreter (python -c pass)"]
    for name in list(rows)[1:]:
        ratios = [t[0] / b[0] for t, b in zip(times[name], bare, strict=True)]
        print(
            f"ratio {name} / bare (wall, per round): median {statistics.median(ratios):.1f}x "
            f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x)"
        )
    shapes = sorted(CORPUS.glob("*.py"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "scripts"
        for i in range(300):
            sub = folder / f"pkg{i // 50}"
            sub.mkdir(parents=True, exist_ok=True)
            shutil.copy(shapes[i % len(shapes)], sub / f"s{i}.py")
        cold = [
            timed([py, "-m", "infertune", "doctor", "--no-cache", str(folder)], env) for _ in range(args.folder_runs)
        ]
        timed([py, "-m", "infertune", "doctor", str(folder)], env)  # fills the findings cache
        warm = [timed([py, "-m", "infertune", "doctor", str(folder)], env) for _ in range(args.folder_runs)]
    print(f"doctor, 300 files, --no-cache        wall {summary([w for w, _, _ in cold])}")
    print(f"doctor, 300 files, --no-cache        cpu  {summary([c for _, c, _ in cold])}")
    print(f"doctor, 300 files, findings cached   wall {summary([w for w, _, _ in warm])}")
    print(f"doctor, 300 files, findings cached   cpu  {summary([c for _, c, _ in warm])}")
    print(
        f"load average after {os.getloadavg()[0]:.2f} (2 cores shared with other work: compare the ratios, "
        "not the absolute times)"
    )
    shutil.rmtree(cache, ignore_errors=True)
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

"""How fast `infertune doctor` answers: one file against a bare interpreter start, and a 300-file folder.

    python benchmarks/doctor_speed.py [--runs 15]

Runs A (bare `python -c pass`), B (`python -m infertune doctor FILE`, bytecode cached as after
`pip install`) and C (the same from a source tree under PYTHONDONTWRITEBYTECODE=1: every module compiled each
run) interleaved A B C A B C ... in fresh processes, so a busy moment hits all; prints wall-clock and CPU
(user+sys) medians, spread and the median ratios. Then checks a folder of 300 files (the corpus shapes,
copied) a few times. The load average before and after says how noisy the machine was. Nothing is asserted:
timing belongs here, not in tests.
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
    # installed: bytecode cached (pip compiles it at install time); here in a private cache folder
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONPYCACHEPREFIX": cache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    # a source tree with PYTHONDONTWRITEBYTECODE=1 (this machine's default): the doctor compiles every run
    src_env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONDONTWRITEBYTECODE": "1"}
    src_env.pop("PYTHONPYCACHEPREFIX", None)
    load0 = os.getloadavg()
    bare_cmd, doc_cmd = [py, "-c", "pass"], [py, "-m", "infertune", "doctor", str(ONE)]
    timed(bare_cmd, env), timed(doc_cmd, env)  # fill the bytecode cache once
    bare, doc, src, ratios, src_ratios = [], [], [], [], []
    for _ in range(args.runs):
        a, b, c = timed(bare_cmd, env), timed(doc_cmd, env), timed(doc_cmd, src_env)
        assert b[2] in (0, 1) and c[2] in (0, 1), "doctor failed"
        bare.append(a)
        doc.append(b)
        src.append(c)
        ratios.append(b[0] / a[0])
        src_ratios.append(c[0] / a[0])
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} interleaved rounds, "
        f"load average before {load0[0]:.2f}"
    )
    print(f"bare interpreter (python -c pass)      wall {summary([w for w, _, _ in bare])}")
    print(f"doctor, one file, bytecode cached      wall {summary([w for w, _, _ in doc])}")
    print(f"doctor, one file, compiled each run    wall {summary([w for w, _, _ in src])}")
    print(f"bare interpreter                       cpu  {summary([c for _, c, _ in bare])}")
    print(f"doctor, one file, bytecode cached      cpu  {summary([c for _, c, _ in doc])}")
    print(f"doctor, one file, compiled each run    cpu  {summary([c for _, c, _ in src])}")
    print(
        f"ratio doctor/bare, cached (wall, per round): median {statistics.median(ratios):.1f}x "
        f"(min {min(ratios):.1f}x, max {max(ratios):.1f}x); limit 10x"
    )
    print(
        f"ratio doctor/bare, compiled each run:        median {statistics.median(src_ratios):.1f}x "
        f"(min {min(src_ratios):.1f}x, max {max(src_ratios):.1f}x)"
    )
    shapes = sorted(CORPUS.glob("*.py"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "scripts"
        for i in range(300):
            sub = folder / f"pkg{i // 50}"
            sub.mkdir(parents=True, exist_ok=True)
            shutil.copy(shapes[i % len(shapes)], sub / f"s{i}.py")
        runs = [timed([py, "-m", "infertune", "doctor", str(folder)], env) for _ in range(args.folder_runs)]
    print(f"doctor, 300 files (one process)     wall {summary([w for w, _, _ in runs])}")
    print(f"doctor, 300 files                   cpu  {summary([c for _, c, _ in runs])}")
    print(
        f"load average after {os.getloadavg()[0]:.2f} (2 cores shared with other work: compare the ratios, "
        "not the absolute times)"
    )
    shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()

"""An 8-configuration `sweep` on a Ray cluster of two workers against one (issue #34): the wall time of the
whole sweep, and each configuration's own timing in both, which should not move beyond its noise.

    PYTHONPATH=src .venv/bin/python benchmarks/sweep_workers.py [--rounds 1] [--max-new-tokens 16]

A real local Ray head in this process (`ray.init`, two CPUs) with two custom device resources,
`infertune_device_0` and `_1`, each standing for one core: "one worker" lets the sweep use the first device
only (one lane), "two workers" both (two lanes side by side). Every trial is the real isolated trial child on a
tiny random Llama (tests/conftest.py's build_tiny_model), one torch thread each (OMP_NUM_THREADS=1), so two
trials side by side need the two cores. The grid: dtype x attention x KV cache (2 x 2 x 2). Rounds alternate
one, two, one, two, ... so a drift of the machine's load hits both. Prints a markdown summary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = {"dtype": ["float32", "bfloat16"], "attn": ["sdpa", "eager"], "kv_cache": ["dynamic", "static"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=1, help="pairs of sweeps (one worker, then two)")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"  # each trial one core: its Ray worker and trial child inherit it
    sys.path.insert(0, str(ROOT))
    import ray

    from infertune.core.workload import Workload
    from infertune.measure.cluster import RayExecutor
    from infertune.techniques import Setup
    from infertune.tuning.sweep import SweepRun, SweepSpec, sweep
    from tests.conftest import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="sweep-workers-"))
    model = build_tiny_model(tmp / "tiny")
    wl = Workload(
        model=str(model), prompts=["Once upon a time"], max_new_tokens=args.max_new_tokens, repeats=args.repeats
    )
    spec = SweepSpec(models=[str(model)], model_paths=[str(model)], workload=wl, start=Setup(), grid=GRID)
    ray.init(
        num_cpus=2,
        resources={"infertune_device_0": 1, "infertune_device_1": 1},
        include_dashboard=False,
        log_to_driver=False,
    )
    load_before = os.getloadavg()[0]
    walls: dict[int, list[float]] = {1: [], 2: []}
    e2e: dict[int, dict[int, list[float]]] = {1: {}, 2: {}}
    busy = {1: 0, 2: 0}
    try:
        for r in range(args.rounds):
            for workers in (1, 2):
                ex = RayExecutor(devices=[f"infertune_device_{i}" for i in range(workers)])
                began = time.monotonic()
                done = sweep(SweepRun.create(tmp / f"r{r}-w{workers}", spec), ex)
                walls[workers].append(time.monotonic() - began)
                for p in done:
                    if p.objective is not None:
                        e2e[workers].setdefault(p.index, []).append(p.objective)
                    busy[workers] += bool(p.trial.machine and p.trial.machine.busy)
                failed = [f"[{p.index}] {p.trial.status}: {p.trial.error}" for p in done if p.objective is None]
                print(f"round {r + 1}, {workers} worker(s): {walls[workers][-1]:.1f} s; failed: {failed or 'none'}")
    finally:
        ray.shutdown()
    load_after = os.getloadavg()[0]
    one, two = statistics.median(walls[1]), statistics.median(walls[2])
    print(f"\n| workers | sweep wall time, s (median of {args.rounds}) | each run |")
    print("|---|---|---|")
    for w, m in ((1, one), (2, two)):
        print(f"| {w} | {m:.1f} | {', '.join(f'{x:.1f}' for x in walls[w])} |")
    print(f"\ntwo workers / one: {two / one:.2f} of the wall time (ideal 0.50)")
    print("\n| config | e2e s, one worker (median) | e2e s, two workers (median) | two / one |")
    print("|---|---|---|---|")
    ratios = []
    for i in sorted(e2e[1]):
        if i in e2e[2]:
            a, b = statistics.median(e2e[1][i]), statistics.median(e2e[2][i])
            ratios.append(b / a)
            print(f"| {i} | {a:.4f} | {b:.4f} | {b / a:.2f} |")
    if ratios:
        print(
            f"\nper-configuration e2e, two workers / one: median {statistics.median(ratios):.2f}, "
            f"range {min(ratios):.2f}-{max(ratios):.2f} over {len(ratios)} configurations"
        )
    print(f"trials on a busy machine: one worker {busy[1]}, two workers {busy[2]} (of {8 * args.rounds} each)")
    print(f"load average (1 min) before {load_before:.2f}, after {load_after:.2f}; cores here: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

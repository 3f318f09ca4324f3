"""Does `tune` find what an exhaustive grid finds, with fewer trials? Side by side, one run, this machine,
both sides measured with repeats, and the verdict with how sure it is.

Tuner: `infertune tune` from the naive start (float32, eager) with the workload and objective below, its
usual interleaved pairs per step (docs/tuning.md). Grid: every CPU-runnable combination of dtype (float32,
bfloat16) x attention (eager, sdpa, flex_attention; `--attn` narrows it) x KV cache (dynamic, static),
plus the tuner's pick if it is not among them, each measured `--repeats` times in interleaved rounds
(round r measures every cell once, in a rotated order, so a cell's r-th trial and another's were taken
close in time). A cell's value is the median of its trials.

The score compares the tuner's pick with the grid's best *within the grid's own rounds* (paired, round by
round, as the tuner compares): the median ratio and its band (measure/stats.py). "reached" uses the
median; "sure" says whether the band's pessimistic edge also clears the 95 % target. The grid's best is
also compared with its runner-up: when they are within each other's noise, "the grid's best" is itself a
tie. The machine's load over the run is printed (a busy machine widens every band).
Target: >= 95 % of the grid's best with <= 50 % of its trials (issue 33; every tuner trial counted: the
baseline's pilot, the steps' pairs and the end-of-run confirmation).

    .venv/bin/python benchmarks/tuner_vs_grid.py [--objective latency|memory|throughput] [--repeats 3]
        [--attn eager,sdpa,flex_attention] [--max-new-tokens 32]     (~40 min on 2 quiet cores with the defaults)
"""

from __future__ import annotations

import argparse
import itertools
import sys
import tempfile
from pathlib import Path

import numpy as np

from infertune.api import host_facts
from infertune.core.workload import Workload
from infertune.measure import run_trial
from infertune.measure.machine import combine
from infertune.measure.stats import paired
from infertune.measure.zygote import warm_start
from infertune.models import store
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques.render import config_for
from infertune.tuning.loop import tune
from infertune.tuning.run import Run, TuneSpec, best_step
from infertune.tuning.verdict import objective_value


def label(s: Setup) -> str:
    extra = " +compile" if s.compile else ""
    return f"{s.dtype}, {s.attn}, {s.kv_cache} KV{extra}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objective", default="latency", choices=["latency", "memory", "throughput"])
    ap.add_argument("--repeats", type=int, default=3, help="trials per grid cell, in interleaved rounds")
    ap.add_argument("--attn", default="eager,sdpa,flex_attention", help="attention implementations in the grid")
    ap.add_argument("--max-new-tokens", type=int, default=32)
    ap.add_argument("--max-trials", type=int, default=8, help="the tuner's steps at most, baseline included")
    args = ap.parse_args()
    path = store.prepare("smollm2")
    wl = Workload(model="demo", max_new_tokens=args.max_new_tokens)
    higher = args.objective == "throughput"
    loads = []

    spec = TuneSpec(
        model="demo",
        model_path=str(path),
        workload=wl,
        start=Setup(dtype="float32", attn="eager"),
        objective=args.objective,
        max_trials=args.max_trials,
    )
    with tempfile.TemporaryDirectory() as tmp:
        run = Run.create(Path(tmp) / "run", spec)
        events: list[dict] = []
        steps = tune(run, host_facts(spec, profile_model(path)), events.append)
        confirmation = run.confirmation()
    best = best_step(steps)
    tuner_trials = sum(e["event"] == "trial" for e in events)
    loads += [s.machine or s.trial.machine for s in steps]
    print(f"tuner ({args.objective}):")
    for s in steps:
        band = "" if s.delta is None else f" {s.delta:+.1%} ± {s.noise:.1%} over {len(s.pairs)} pairs"
        print(
            f"  {s.index} {s.technique or 'baseline':15} {s.verdict or '-':12}{band}"
            f"{' (adopted)' if s.accepted and s.technique else ''}: {s.reason}"
            + (f" [{s.stopped}]" if s.stopped else ""),
            flush=True,
        )
    if confirmation is not None:
        print(f"  confirmation: {confirmation.reason} [{confirmation.stopped}]", flush=True)

    cells = [
        Setup(dtype=d, attn=a, kv_cache=k)
        for d, a, k in itertools.product(["float32", "bfloat16"], args.attn.split(","), ["dynamic", "static"])
    ]
    grid_cells = len(cells)
    if best.setup not in cells:  # measured beside the grid, not counted as one of its configurations
        cells.append(best.setup)
    values: dict[int, list[float]] = {i: [] for i in range(len(cells))}
    with warm_start(path):  # trials fork from one warm process, as the tuner's do
        for r in range(args.repeats):
            order = list(range(len(cells)))
            order = order[r % len(order) :] + order[: r % len(order)]  # rotate: no cell always runs first
            for i in order:
                t = run_trial(config_for(cells[i]), wl, path, timeout_s=900)
                loads.append(t.machine)
                v = objective_value(args.objective, t)
                values[i].append(np.nan if v is None else v)
                shown = v if v is not None else "-"
                print(f"  round {r + 1}: {label(cells[i]):40} {t.status:7} {shown:>12}", flush=True)
    med = {i: float(np.nanmedian(v)) for i, v in values.items() if not np.all(np.isnan(v))}
    ranked = sorted(med, key=lambda i: -med[i] if higher else med[i])
    g, runner, pick = ranked[0], ranked[1], cells.index(best.setup)
    grid_trials = args.repeats * grid_cells

    def versus(i: int, j: int):
        """j's value against i's, round by round (rounds where both ran)."""
        ok = [k for k in range(args.repeats) if not np.isnan(values[i][k]) and not np.isnan(values[j][k])]
        return paired([values[i][k] for k in ok], [values[j][k] for k in ok])

    print(
        f"\ngrid best: {label(cells[g])}: {med[g]:.4g} (median of {args.repeats}); runner-up "
        f"{label(cells[runner])}: {med[runner]:.4g}"
    )
    c = versus(g, runner)
    print(
        f"  runner-up vs best: {c.delta:+.1%} ± {c.noise or 0:.1%} over {c.n} rounds: "
        f"{'a clear difference' if c.clear else 'within the noise: the grid cannot tell them apart'}"
    )
    p = versus(g, pick)
    # the pick's share of the grid's best, and at the band's pessimistic edge
    reached = (1 + p.delta) if higher else 1 / (1 + p.delta)
    worst = (1 + p.delta - (p.noise or 0)) if higher else 1 / (1 + p.delta + (p.noise or 0))
    print(
        f"tuner pick: {label(best.setup)} in {len(steps)} configurations ({tuner_trials} trials); in the grid's "
        f"rounds: {med[pick]:.4g}, {p.delta:+.1%} ± {p.noise or 0:.1%} against the grid's best"
    )
    print(
        f"tuner reaches {reached:.1%} of the grid's best (band down to {worst:.1%}) with {len(steps) / grid_cells:.0%} "
        f"of its configurations ({tuner_trials / grid_trials:.0%} of its trials); targets: >= 95 %, <= 50 % of trials; "
        f"sure: {'yes' if worst >= 0.95 else 'no (the band reaches below 95 %)'}"
    )
    load = combine(loads)
    if load is not None:
        print(
            f"machine: {'BUSY' if load.busy else 'quiet'} (highest load average {load.load_average:.1f} on "
            f"{load.cores} cores; others used up to {load.others_cpu or 0:.2f} cores"
            f"{'; ' + '; '.join(load.reasons) if load.reasons else ''})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

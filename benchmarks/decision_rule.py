"""How often does the tuner's decision rule decide, how often wrongly, and on how many pairs? A simulation of the
rule itself: the verdict (`tuning.verdict.decide`) and the sequential stopping rules (`tuning.sequential`).

Each trial is its configuration's true time times log-normal noise; on a "busy" machine each trial also has a
20 % chance of running beside other work (1.5-4x slower; the tuner flags such pairs busy, and a busy pair never
stops a step early). The candidate is `effect` faster than the incumbent (0: no real difference; negative:
slower). `--rule sequential` (the tuner's): a pilot of two incumbent trials gives the noise floor, then pairs
until `stop_after` says stop or max_pairs are spent. `--rule fixed` (before issue 33): min_pairs, then one at a
time until the verdict is not inconclusive or max_pairs are spent. Prints, per scenario: the share kept,
rejected and inconclusive, the share decided the wrong way, and the mean pairs used. Seconds, no model.

    .venv/bin/python benchmarks/decision_rule.py [--rule sequential|fixed] [--min-pairs 3] [--max-pairs 5] [--runs 2000]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from infertune.tuning.sequential import clear_threshold, stop_after
from infertune.tuning.verdict import Pair, decide


def simulate(
    effect: float,
    sigma: float,
    busy: bool,
    min_pairs: int,
    max_pairs: int,
    runs: int,
    rng: np.random.Generator,
    rule: str = "sequential",
    tie: float | None = None,
) -> dict[str, float]:
    """`tie`: the candidate's true memory saving (the tie axis, 0.3 % noise per trial); None: no tie axis."""
    counts = {"kept": 0, "rejected": 0, "inconclusive": 0, "wrong": 0, "pairs": 0, "adopted": 0}

    def draw(true: float) -> tuple[float, bool]:
        x = true * float(np.exp(rng.normal(0, sigma)))
        if busy and rng.random() < 0.2:
            return x * rng.uniform(1.5, 4), True
        return x, False

    def mem_draw(true: float) -> float:
        return true * float(np.exp(rng.normal(0, 0.003)))

    for _ in range(runs):
        (a, _), (b, _) = draw(1.0), draw(1.0)
        threshold = clear_threshold(abs(b / a - 1))
        pairs: list[Pair] = []
        for _k in range(max_pairs):
            (inc, slow_i), (cand, slow_c) = draw(1.0), draw(1.0 - effect)
            mem = {} if tie is None else {"incumbent_tie": mem_draw(1.0), "candidate_tie": mem_draw(1.0 - tie)}
            pairs.append(Pair(incumbent=inc, candidate=cand, busy=slow_i or slow_c, **mem))
            if rule == "sequential":
                if stop_after("latency", pairs, min_pairs, max_pairs, threshold):
                    break
            elif len(pairs) >= min_pairs and decide("latency", pairs).verdict != "inconclusive":
                break
        d = decide("latency", pairs)
        verdict = d.verdict if len(pairs) > 1 else ("rejected" if pairs[0].candidate > pairs[0].incumbent else "kept")
        counts[verdict] += 1
        counts["pairs"] += len(pairs)
        counts["adopted"] += d.accepted if len(pairs) > 1 else verdict == "kept"
        if (
            (effect == 0 and verdict != "inconclusive")
            or (effect > 0 and verdict == "rejected")
            or (effect < 0 and verdict == "kept")
        ):
            counts["wrong"] += 1
    return {k: v / runs for k, v in counts.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", choices=["sequential", "fixed"], default="sequential")
    ap.add_argument("--min-pairs", type=int, default=3)
    ap.add_argument("--max-pairs", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{args.rule} rule: {args.min_pairs}-{args.max_pairs} interleaved pairs, {args.runs} simulated steps each")
    print(f"{'machine':28} {'effect':>6} {'kept':>6} {'rejected':>8} {'inconcl.':>8} {'wrong':>6} {'pairs':>5}")
    for label, sigma, busy in (
        ("quiet (3 % noise)", 0.03, False),
        ("noisy (10 % noise)", 0.10, False),
        ("busy (5 % + 20 % disturbed)", 0.05, True),
    ):
        for effect in (-0.53, -0.05, 0.0, 0.05, 0.15, 0.30):
            r = simulate(effect, sigma, busy, args.min_pairs, args.max_pairs, args.runs, rng, args.rule)
            print(
                f"{label:28} {effect:>+6.0%} {r['kept']:>6.1%} {r['rejected']:>8.1%} {r['inconclusive']:>8.1%} "
                f"{r['wrong']:>6.1%} {r['pairs']:>5.1f}"
            )
    print(
        "effect: how much faster the candidate truly is (negative: slower); wrong: a verdict on no real "
        "difference, a faster candidate rejected, or a slower one kept"
    )
    print(
        "\nwith a tie axis (memory, 0.3 % noise): "
        f"{'machine':28} {'effect':>6} {'saves':>5} {'adopted':>7} {'pairs':>5}"
    )
    for label, sigma, busy in (("quiet (3 % noise)", 0.03, False), ("noisy (10 % noise)", 0.10, False)):
        for effect, tie in ((0.0, 0.15), (0.0, 0.47), (-0.05, 0.15), (0.0, 0.05)):
            r = simulate(effect, sigma, busy, args.min_pairs, args.max_pairs, args.runs, rng, args.rule, tie)
            print(f"{'':39}{label:28} {effect:>+6.0%} {tie:>5.0%} {r['adopted']:>7.1%} {r['pairs']:>5.1f}")
    print("adopted: kept on the objective or on the tie (the right answer where the saving is >= 10 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

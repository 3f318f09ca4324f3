"""How often does the tuner's decision rule decide, and how often wrongly? A simulation of the rule itself.

Feeds `infertune.tuning.verdict.decide` (the tuner's verdict from interleaved pairs) with simulated trial times:
each trial is its configuration's true time times log-normal noise; on a "busy" machine, each trial also
has a 20 % chance of running beside other work (1.5-4x slower). The candidate is `effect` faster than the
incumbent (0: no real difference). Pairs are added as the tuner adds them (min_pairs, then one at a time
until the verdict is not inconclusive or max_pairs are spent). Prints, per scenario: the share kept,
rejected and inconclusive, the share decided the wrong way, and the mean pairs used. Seconds, no model.

    .venv/bin/python benchmarks/decision_rule.py [--min-pairs 3] [--max-pairs 5] [--runs 2000]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from infertune.tuning.verdict import Pair, decide


def simulate(
    effect: float, sigma: float, busy: bool, min_pairs: int, max_pairs: int, runs: int, rng: np.random.Generator
) -> dict[str, float]:
    counts = {"kept": 0, "rejected": 0, "inconclusive": 0, "wrong": 0, "pairs": 0}
    for _ in range(runs):
        pairs: list[Pair] = []
        verdict = "inconclusive"
        for _k in range(max_pairs):
            a, b = np.exp(rng.normal(0, sigma, 2)) * [1.0, 1.0 - effect]
            if busy:
                a, b = (x * rng.uniform(1.5, 4) if rng.random() < 0.2 else x for x in (a, b))
            pairs.append(Pair(incumbent=float(a), candidate=float(b)))
            if len(pairs) >= min_pairs:
                verdict = decide("latency", pairs).verdict
                if verdict != "inconclusive":
                    break
        counts[verdict] += 1
        counts["pairs"] += len(pairs)
        if (effect == 0 and verdict != "inconclusive") or (
            effect > 0 and verdict == "rejected" and decide("latency", pairs).delta > 0
        ):
            counts["wrong"] += 1
    return {k: v / runs for k, v in counts.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-pairs", type=int, default=3)
    ap.add_argument("--max-pairs", type=int, default=5)
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"decide(): {args.min_pairs}-{args.max_pairs} interleaved pairs, {args.runs} simulated steps each")
    print(f"{'machine':28} {'effect':>6} {'kept':>6} {'rejected':>8} {'inconcl.':>8} {'wrong':>6} {'pairs':>5}")
    for label, sigma, busy in (
        ("quiet (3 % noise)", 0.03, False),
        ("noisy (10 % noise)", 0.10, False),
        ("busy (5 % + 20 % disturbed)", 0.05, True),
    ):
        for effect in (0.0, 0.05, 0.15, 0.30):
            r = simulate(effect, sigma, busy, args.min_pairs, args.max_pairs, args.runs, rng)
            print(
                f"{label:28} {effect:>6.0%} {r['kept']:>6.1%} {r['rejected']:>8.1%} {r['inconclusive']:>8.1%} "
                f"{r['wrong']:>6.1%} {r['pairs']:>5.1f}"
            )
    print("wrong: a verdict on no real difference (effect 0), or a faster candidate rejected as slower")
    return 0


if __name__ == "__main__":
    sys.exit(main())

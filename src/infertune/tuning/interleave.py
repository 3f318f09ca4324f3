"""A candidate against an incumbent in interleaved pairs of fresh trials (C I, I C, C I, ...), until the
sequential rules (tuning/sequential.py) say the pairs are enough or the budget is spent."""

from __future__ import annotations

from collections.abc import Callable

from infertune.measure.results import TrialResult
from infertune.techniques import Setup
from infertune.tuning.run import TuneSpec
from infertune.tuning.sequential import stop_after
from infertune.tuning.verdict import TIE_AXIS, Pair, objective_value

Gate = Callable[[TrialResult, bool], "str | None"]


def interleave(
    spec: TuneSpec,
    trial: Callable[..., TrialResult],
    index: int,
    candidate: Setup,
    incumbent: Setup,
    candidate_first: bool = True,
    gate: Gate | None = None,
    threshold: float | None = None,
    role: str = "",
    loser_pairs: int = 1,
) -> tuple[list[Pair], list[TrialResult], str | None, str]:
    """Interleaved pairs of the candidate and the incumbent, the order alternating from `candidate_first`, until
    `stop_after` says stop or max_pairs are spent. A pair with a failed trial is lost, its budget spent. `gate`
    sees each candidate trial (and whether it is the first, the one scored for quality) and may refuse the
    candidate at once: then (the pairs so far, every trial, why). `threshold`: the run's clear-loser/winner
    threshold (sequential.clear_threshold), and `loser_pairs` the pairs its clear-loser stop needs.
    `role` prefixes the trials' roles (e.g. "confirm "). Last: why the
    pairs stopped."""
    pairs: list[Pair] = []
    trials: list[TrialResult] = []
    for k in range(spec.max_pairs):
        runs: dict[str, TrialResult] = {}
        for side in ("candidate", "incumbent") if (k % 2 == 0) == candidate_first else ("incumbent", "candidate"):
            t = trial(
                index,
                candidate if side == "candidate" else incumbent,
                role + side,
                k + 1,
                scored=gate is not None and side == "candidate" and k == 0,
            )
            trials.append(t)
            runs[side] = t
            if gate is not None and side == "candidate" and (refused := gate(t, k == 0)):
                return pairs, trials, refused, f"refused after {len(pairs) + 1} pair(s)"
        if any(t.status != "ok" for t in runs.values()):
            continue
        pairs.append(pair(spec, runs["incumbent"], runs["candidate"]))
        if why := stop_after(spec.objective, pairs, spec.min_pairs, spec.max_pairs, threshold, loser_pairs):
            return pairs, trials, None, why
    return pairs, trials, None, f"{len(pairs)} pairs: the budget of {spec.max_pairs} spent on a close call"


def pair(spec: TuneSpec, inc: TrialResult, cand: TrialResult) -> Pair:
    """Two finished trials as a pair (a failed trial has no objective and makes no pair)."""
    axis = TIE_AXIS[spec.objective]
    incumbent, candidate = objective_value(spec.objective, inc), objective_value(spec.objective, cand)
    if incumbent is None or candidate is None:
        raise ValueError("a pair needs two finished trials")
    return Pair(
        incumbent=incumbent,
        candidate=candidate,
        incumbent_tie=objective_value(axis, inc),
        candidate_tie=objective_value(axis, cand),
        busy=any(x.machine is not None and x.machine.busy for x in (inc, cand)),
    )

"""The end-of-run confirmation: the pick measured again against the baseline, fresh, in interleaved pairs.

A step kept its change on pairs measured minutes ago against the incumbent of the time; the pick is the
product of several such draws, and the largest draw is the likeliest to have been lucky. So the gain the run
reports is measured once more, at the end, on the machine as it is now: the pick (candidate) against the
baseline (incumbent), the order reversed from the steps (baseline first), under the same sequential rules and
the same verdict rule. Its outcome:
- confirmed: the verdict rule adopts the pick over the baseline (a clear gain, or a tie won on the other axis);
- not confirmed: within the noise of the fresh pairs; the pick stays (each of its changes was clear in its
  own step) and the report says the total gain did not show again;
- reversed: the baseline is clearly better; every adopted change is undone (a later line per step in
  results.jsonl, which a resume reads as standing) and the baseline is the pick.
"""

from __future__ import annotations

from collections.abc import Callable

from infertune.measure.machine import combine
from infertune.measure.results import TrialResult
from infertune.tuning.interleave import interleave
from infertune.tuning.run import Confirmation, Step, TuneSpec
from infertune.tuning.sequential import clear_threshold
from infertune.tuning.verdict import decide


def confirm(
    spec: TuneSpec, steps: list[Step], trial: Callable[..., TrialResult], floor: float | None
) -> Confirmation | None:
    """The pick against the baseline in fresh pairs (None: the pick is the baseline, nothing to confirm); its
    trials are numbered after the last step.
    `floor`: the run's latest noise floor (for the clear-loser/winner threshold)."""
    accepted = [s for s in steps if s.accepted]
    base, pick = steps[0], accepted[-1] if accepted else steps[0]
    if pick.index == 0 or not base.accepted:
        return None
    threshold = clear_threshold(floor)
    pairs, trials, _, stopped = interleave(
        spec,
        trial,
        len(steps),
        pick.setup,
        base.setup,
        candidate_first=False,
        threshold=threshold,
        role="confirm ",
        loser_pairs=2,  # a reversal rests on both orders, never on one pair
    )
    common = {
        "winner": pick.index,
        "pairs": pairs,
        "stopped": stopped,
        "machine": combine([t.machine for t in trials]),
        "duration_s": sum(t.duration_s or 0 for t in trials),
    }
    head = f"the pick (step {pick.index}) against the baseline, {len(pairs)} fresh interleaved pair(s) at the end: "
    if len(pairs) < 2:
        return Confirmation(
            **common, outcome="not confirmed", reason=head + "too few usable pairs (failed trials) to confirm"
        )
    d = decide(spec.objective, pairs)
    worse = d.verdict == "rejected" and not d.accepted and ((d.delta or 0) < 0) == (spec.objective == "throughput")
    outcome = "confirmed" if d.accepted else ("reversed" if worse else "not confirmed")
    tail = {
        "confirmed": ": confirmed",
        "not confirmed": ": not confirmed (the pick stays; its gain did not show clear of the noise again)",
        "reversed": ": reversed (the baseline is better now; the changes are undone)",
    }[outcome]
    return Confirmation(
        **common,
        outcome=outcome,
        verdict=d.verdict,
        delta=d.delta,
        noise=d.noise,
        tie=d.tie,
        reason=head + d.reason + tail,
    )


def undone(steps: list[Step], c: Confirmation) -> list[Step]:
    """The adopted steps, each undone by a reversed confirmation (their later lines in results.jsonl)."""
    return [
        s.model_copy(
            update={
                "accepted": False,
                "reason": f"{s.reason}; undone at the end: the baseline measured better ({c.reason})",
            }
        )
        for s in steps
        if s.accepted and s.index > 0
    ]

"""When a step's interleaved pairs stop (docs/tuning.md, "When a step stops"): as soon as the verdict is settled,
either way, or can no longer change; the pair budget is spent only on close calls. The verdict rule itself
(tuning/verdict.py) does not change: these rules only decide how many pairs it is given.

After each pair, in this order (`stop_after`):
1. a clear loser: every pair so far, none on a busy machine, loses by more than the run's threshold
   (`clear_threshold`: LOSER_FLOORS x the noise floor, at least CLEAR_MIN): rejected, from the first pair
   (from the second when every pair gains TIE_GAIN on the tie axis: a pair in each order before a real
   saving is thrown away);
2. a clear winner: at least two pairs (one in each order, so a drift cancels), none busy, every one gaining
   by more than the same threshold, and the verdict rule agrees (kept);
3. a clear winner on the tie: at least two pairs, none busy, the objective can no longer be rejected (a pair
   gains on it, and up to 7 pairs the band is the range of the ratios), every pair gaining on the tie axis by
   more than TIE_GAIN plus TIE_FLOORS x the spread of the pairs' tie ratios (at least TIE_FLOOR_MIN), and the
   verdict rule adopts it: bf16 at half the memory, sdpa at 15 % less, decided in two pairs, not min_pairs;
4. decided: from min_pairs on, the verdict rule keeps (on the objective or on the tie) or rejects;
5. futile: the remaining budget cannot change an inconclusive verdict (`futile`): up to 7 pairs the band is
   the range of the ratios, so once the pairs disagree on the direction, on the objective and on the tie
   axis alike, no later pair can make either clear; the step stops, inconclusive, where the budget would
   have ended inconclusive too.
"""

from __future__ import annotations

from infertune.measure.stats import band_rank
from infertune.tuning.verdict import TIE_AXIS, TIE_GAIN, Objective, Pair, decide

LOSER_FLOORS = 3.0  # the clear-loser/winner threshold, in noise floors
CLEAR_MIN = 0.20  # ... and never under this
FLOOR_MIN = 0.02  # a pilot of two equal numbers does not make a noise-free machine
TIE_FLOORS = 3.0  # the tie winner's margin over TIE_GAIN, in spreads of its pairs' tie ratios
TIE_FLOOR_MIN = 0.01  # ... never under 1 %: memory peaks repeat to ~0.1 %, latency far less closely
CLEAR_LOSER = "a clear loser"  # how stop_after says it stopped on rule 1 (what the step reads back)
CLEAR_WINNER = "a clear winner"
TIE_WINNER = "a clear winner on the tie"
FUTILE = "the verdict cannot change"


def clear_threshold(floor: float | None) -> float | None:
    """The loss (or gain) on the objective beyond which a pair counts as clear on its own (None: no pilot,
    no early stop on rules 1-2)."""
    return None if floor is None else max(LOSER_FLOORS * max(floor, FLOOR_MIN), CLEAR_MIN)


def loss(objective: Objective, p: Pair) -> float:
    """How much worse the candidate is than the incumbent in one pair (negative: better)."""
    if p.incumbent <= 0:
        return 0.0
    r = p.candidate / p.incumbent - 1
    return -r if objective == "throughput" else r


def _both_sides(values: list[tuple[float | None, float | None]]) -> bool:
    """Pairs (incumbent, candidate) on both sides of "no change" (a missing value: no axis to decide on)."""
    known = [(a, b) for a, b in values if a is not None and b is not None]
    if len(known) < len(values):
        return True
    return any(b <= a for a, b in known) and any(b >= a for a, b in known)


def _tie_gains(objective: Objective, pairs: list[Pair]) -> list[float] | None:
    """Each pair's gain on the tie axis (positive: better); None when a pair has no tie value to judge."""
    axis = TIE_AXIS[objective]
    if any(p.incumbent_tie is None or p.candidate_tie is None or p.incumbent_tie <= 0 for p in pairs):
        return None
    return [-loss(axis, Pair(incumbent=p.incumbent_tie or 0, candidate=p.candidate_tie or 0)) for p in pairs]


def tie_winner(objective: Objective, pairs: list[Pair], max_pairs: int) -> bool:
    """True when the step is adopted on the tie whatever the rest of the budget brings: the objective cannot
    be rejected (a pair gains on it, and the band is the range of the ratios: a rejection needs every pair to
    lose), and every pair gains on the tie axis by more than TIE_GAIN plus TIE_FLOORS spreads of those gains."""
    if len(pairs) < 2 or band_rank(max_pairs) != 1 or not any(loss(objective, p) < 0 for p in pairs):
        return False
    gains = _tie_gains(objective, pairs)
    if gains is None:
        return False
    margin = TIE_FLOORS * max(max(gains) - min(gains), TIE_FLOOR_MIN)
    return min(gains) > TIE_GAIN + margin and decide(objective, pairs).accepted


def _saves_on_tie(objective: Objective, pairs: list[Pair]) -> bool:
    """Every pair gains at least TIE_GAIN on the tie axis: a candidate with something to offer there (bf16's half
    the memory) is rejected on the objective only on a pair in each order, never on one."""
    gains = _tie_gains(objective, pairs)
    return gains is not None and all(g >= TIE_GAIN for g in gains)


def futile(pairs: list[Pair], max_pairs: int) -> bool:
    """True when no further pair within `max_pairs` can change an inconclusive verdict. While the band is the
    range of the ratios (band_rank 1: up to 7 pairs), pairs on both sides of "no change" keep the band across
    it whatever comes next; so the step cannot be kept or rejected on the objective once its pairs disagree on
    the direction, nor on the tie once the tie axis's pairs do. Exact, not a guess: it stops only where the
    budget would have ended inconclusive too."""
    if len(pairs) < 2 or len(pairs) >= max_pairs or band_rank(max_pairs) != 1:
        return False
    return _both_sides([(p.incumbent, p.candidate) for p in pairs]) and _both_sides(
        [(p.incumbent_tie, p.candidate_tie) for p in pairs]
    )


def stop_after(
    objective: Objective,
    pairs: list[Pair],
    min_pairs: int,
    max_pairs: int,
    threshold: float | None,
    loser_pairs: int = 1,
) -> str | None:
    """Why the pairs so far are enough (None: measure another pair). `loser_pairs`: the pairs rule 1 needs (the
    end-of-run confirmation asks two, one in each order: a reversal undoes every adopted step, and one pair
    that a burst of other work slowed must not)."""
    n = len(pairs)
    if threshold is not None and not any(p.busy for p in pairs):  # a busy pair never stops a step early
        need = max(loser_pairs, 2) if _saves_on_tie(objective, pairs) else loser_pairs
        if n >= need and all(loss(objective, p) > threshold for p in pairs):
            return f"stopped after {n} pair(s): {CLEAR_LOSER} (each lost > {threshold:.0%})"
        if n >= 2 and all(-loss(objective, p) > threshold for p in pairs) and decide(objective, pairs).accepted:
            return f"stopped after {n} pairs: {CLEAR_WINNER} (each gained > {threshold:.0%})"
        if tie_winner(objective, pairs, max_pairs):
            return f"stopped after {n} pairs: {TIE_WINNER} (the objective cannot be rejected)"
    if n >= min_pairs:
        d = decide(objective, pairs)
        if d.verdict != "inconclusive" or d.accepted:
            return f"stopped after {n} pairs: the verdict is clear"
    if futile(pairs, max_pairs):
        return f"stopped after {n} pairs: {FUTILE} within the budget of {max_pairs}"
    return None

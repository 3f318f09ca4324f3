"""A step's verdict: the candidate against the incumbent over interleaved pairs, judged against the noise
those pairs measured (measure/stats.py); the tie rule weighs the other axis the same way."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from infertune.core import human
from infertune.measure.results import TrialResult
from infertune.measure.stats import Paired, paired

Objective = Literal["memory", "latency", "throughput"]
Verdict = Literal["kept", "rejected", "inconclusive"]
MIN_GAIN = 0.02  # a change clear of the noise must also gain 2 % on the objective to be worth making
# A tie on the objective (a difference within its band) is broken by a clear gain on the other axis: memory
# for a latency or throughput objective, latency for a memory objective, at least TIE_GAIN and clear of that
# axis's own band. bf16 on a CPU without native bf16 is the case in point: the same latency (slower
# prefill, faster decode) at half the memory.
TIE_GAIN = 0.10
TIE_AXIS: dict[str, Objective] = {"latency": "memory", "throughput": "memory", "memory": "latency"}


def objective_value(objective: Objective, t: TrialResult) -> float | None:
    m = t.metrics
    if t.status != "ok" or m is None:
        return None
    # memory: the trial's peak above what the process held before the model load (on CPU the Python/torch
    # runtime; on CUDA ~0), so the 2 % threshold applies to what the configuration changes
    memory = float(m.peak_memory_bytes - m.baseline_memory_bytes)
    return {"memory": memory, "latency": m.e2e_s, "throughput": m.tokens_per_s}[objective]


class Pair(BaseModel):
    """One interleaved pair: the incumbent and the candidate measured next to each other (measured)."""

    incumbent: float  # the objective's value
    candidate: float
    incumbent_tie: float | None = None  # the tie axis's value (TIE_AXIS)
    candidate_tie: float | None = None
    busy: bool = False  # either trial of the pair ran on a busy machine


class Decision(BaseModel):
    verdict: Verdict
    accepted: bool
    delta: float | None
    noise: float | None
    tie: Paired | None
    reason: str


def _improvement(objective: Objective, delta: float) -> float:
    """A relative change as a gain (positive: better)."""
    return delta if objective == "throughput" else -delta


def _band(c: Paired) -> str:
    return f"band ±{c.noise:.1%}" if c.noise is not None else "no band"


def decide(objective: Objective, pairs: list[Pair]) -> Decision:
    """The verdict on a candidate from its interleaved pairs against the incumbent: kept when the objective
    gains clearly (beyond its own band) and by MIN_GAIN; rejected when it loses clearly (or gains clearly
    but by less than MIN_GAIN); inconclusive otherwise. A tie (inconclusive, or a clear gain too small to
    matter) is kept when the other axis gains at least TIE_GAIN, clear of that axis's own band."""
    c = paired([p.incumbent for p in pairs], [p.candidate for p in pairs])
    gain = _improvement(objective, c.delta)
    head = (
        f"{objective} {c.delta:+.1%} paired ({_band(c)}, {c.n} interleaved pairs; medians "
        f"{human.objective(objective, c.a)} -> {human.objective(objective, c.b)})"
    )
    if c.clear and gain >= MIN_GAIN:
        return Decision(verdict="kept", accepted=True, delta=c.delta, noise=c.noise, tie=None, reason=head)
    if c.clear and gain < 0:
        return Decision(
            verdict="rejected",
            accepted=False,
            delta=c.delta,
            noise=c.noise,
            tie=None,
            reason=head + ": worse, beyond the noise",
        )
    axis = TIE_AXIS[objective]
    tied = [(a, b) for a, b in ((p.incumbent_tie, p.candidate_tie) for p in pairs) if a is not None and b is not None]
    t = paired([a for a, _ in tied], [b for _, b in tied]) if len(tied) == len(pairs) else None
    verdict: Verdict = "rejected" if c.clear else "inconclusive"
    if t is not None and t.clear and _improvement(axis, t.delta) >= max(TIE_GAIN, t.noise or 0):
        return Decision(
            verdict="kept" if c.clear else "inconclusive",
            accepted=True,
            delta=c.delta,
            noise=c.noise,
            tie=t,
            reason=f"{head}: a tie; {axis} {t.delta:+.1%} paired ({_band(t)}; {human.objective(axis, t.a)} -> "
            f"{human.objective(axis, t.b)}): kept on the tie (>= {TIE_GAIN:.0%} better)",
        )
    why = (
        f": clear, but under the {MIN_GAIN:.0%} worth a change"
        if c.clear
        else ": within the noise, inconclusive; the incumbent stays"
    )
    return Decision(verdict=verdict, accepted=False, delta=c.delta, noise=c.noise, tie=t, reason=head + why)

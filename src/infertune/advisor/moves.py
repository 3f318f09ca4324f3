"""Moves: one knob of the current setup set to another value, estimated before and after, and ranked.

A move's effect is the estimator's before/after (memory, fit, TTFT, time per token, throughput under this
workload's concurrency), with the documented factors of techniques.factors where the roofline has no term
for an effect (labelled as such). Ranking:

- when the current setup does not fit (a blocking memory finding): the moves that fit; among them those on
  the stated hardware first, then those that do not make decoding much slower, then the least quality risk,
  then the expert's order (cheap before costly);
- otherwise (speed, queueing, tight memory): moves on the stated hardware first, then the least doubt
  (quality risk, plus one notch for a gain only the roofline's blind spot can show: compile, fused
  kernels), real gains (>= 20 %) before unmodelled ones, fewer open questions, then the largest expected
  gain on what hurts (gains within the same power of two tie), then the expert's order. For queueing, a
  batching scheduler that admits requests as their KV cache fits "runs" even where all of them never fit.

A move that needs hardware the user has not stated (more machines) is therefore never `next` while a move
on the stated hardware fits.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from infertune.advisor.diagnose import serving_times, worst_device
from infertune.core.errors import UserError
from infertune.estimate import Estimate
from infertune.techniques import REGISTRY, Facts, Setup, Technique, factors, slow_paths
from infertune.techniques.base import RISK_ORDER, EngineEvidence, Risk
from infertune.techniques.render import estimate_setup

MEMORY = ("load-memory", "kv-cache-growth", "long-input-attention")
SLOWER = 1.5  # a move that makes decoding this much slower than now costs speed (offload, int8 kernels)
REAL_GAIN = 1.2  # a gain below this is within the estimate's noise


class Expected(BaseModel):
    kind: Literal["estimate"] = "estimate"
    peak_bytes_before: int
    peak_bytes_after: int
    fits_before: bool
    fits_after: bool
    ttft_s_before: float
    ttft_s_after: float
    tpot_s_before: float
    tpot_s_after: float
    tokens_per_s_before: float
    tokens_per_s_after: float
    max_input_len_after: int | None
    max_concurrency_after: int | None
    max_concurrency_before: int | None = None  # sequences whose KV cache fits at once, before the move
    note: str | None = None  # what the estimate cannot show (kernel quality beyond its factors)
    # the roofline time per token: a bound a run never beats, kept beside the expected figures above
    tpot_bound_s_before: float | None = None
    tpot_bound_s_after: float | None = None
    # documented factors used where the roofline has no term (techniques.factors), each with its sources
    factors_before: list[str] = []
    factors_after: list[str] = []
    weights_bytes_before: int | None = None
    weights_bytes_after: int | None = None

    def sees_a_difference(self) -> bool:
        """Whether the estimate expects the move to change anything at all: time, memory or capacity by any amount
        (eager -> sdpa on a 4-token prompt: 0.1 % of memory), a priced slow path, or a kernel quality it names but
        cannot price (`note`). False only where it computes the two setups as one (FlexAttention after sdpa)."""
        pairs = [
            (self.ttft_s_before, self.ttft_s_after),
            (self.tpot_s_before, self.tpot_s_after),
            (self.peak_bytes_before, self.peak_bytes_after),
            (self.max_concurrency_before, self.max_concurrency_after),
        ]
        moved = any(a is not None and b is not None and a != b for a, b in pairs)
        return (
            moved or self.fits_before != self.fits_after or self.factors_before != self.factors_after or bool(self.note)
        )


class Compatibility(BaseModel):
    ok: bool
    issues: list[str]


class Candidate(BaseModel):
    """One move, built once by the advisor (`candidate`): the setup it leads to, its expected effect (the
    estimates before and after, documented factors included) and its risk. The tuner measures it, the report
    and the MCP tool show it; none of them computes its effect again."""

    technique: str
    setup: Setup  # the whole setup after the move
    settings: dict[str, Any]  # the knobs this one change sets (exactly those that change)
    addresses: list[str]
    expected: Expected
    quality_risk: Risk  # what this move may cost in output quality (none: same numerics or back to full)
    needs_hardware: str | None = None  # hardware the user has not stated (more machines): a question, not a fact
    compatibility: Compatibility
    # the move measured on this workload and host (a tune run's serve stage: advise --measured RUN): it outranks
    # the estimate above
    measured: list[EngineEvidence] = Field(default_factory=list)

    @property
    def measured_better(self) -> bool:
        return any(e.better for e in self.measured)

    @property
    def open_questions(self) -> int:
        """Open questions the move depends on (is there such a checkpoint? does the engine support it?)."""
        return sum("?" in i for i in self.compatibility.issues)


def candidate(
    f: Facts, t: Technique, current: Setup, after: Setup, base: Estimate, base_factors: list[str], issues: list[str]
) -> Candidate:
    """The move from `current` to `after` by `t`, estimated against `base` (the current setup's estimate). Raises
    UserError when the estimator cannot place the setup at all (weights above every budget)."""
    est, factors = effective(f, after)
    return Candidate(
        technique=t.id,
        setup=after,
        settings=current.changes(after),
        addresses=list(t.addressed(current, after)),
        expected=expected(f, base, est, current, after, t.note(current, after), base_factors, factors),
        quality_risk=t.risk(f, current, after),
        needs_hardware=f"{after.pp} machines of {f.gpus} x {f.accelerator.name} (stated: one)"
        if after.pp > 1
        else None,
        compatibility=Compatibility(ok=True, issues=issues + t.known_issues(current, after)),
        measured=t.evidence(f, after),
    )


def effective(f: Facts, s: Setup) -> tuple[Estimate, list[str]]:
    """The setup's estimate with the documented factors that apply to it folded into its speed, and their
    labels. The estimate of the reference setup (the same without the effect) is what the ratio multiplies."""
    e = estimate_setup(f, s)
    found = slow_paths.applicable(f, s)
    if not found:
        return e, []
    ref_setup = factors.reference(found, s)
    try:
        ref = estimate_setup(f, ref_setup) if ref_setup != s else e
    except UserError:  # the reference cannot be placed (it does not fit a budget): its own roofline then
        ref = e
    sp, rp = e.speed, ref.speed
    decode, pre = factors.ratio(found, "decode"), factors.ratio(found, "prefill")
    tpot = max(sp.tpot_s, decode * rp.tpot_s)
    prefill = max(sp.prefill_s, pre * rp.prefill_s)
    seqs = e.settings.batch * e.settings.concurrency
    x, rx = sp.expected, rp.expected
    if x is not None and rx is not None:  # a floor, as on the roofline: an effect the expected model has counts once
        xt, xp = max(x.tpot_s, decode * rx.tpot_s), max(x.prefill_s, pre * rx.prefill_s)
        x = x.model_copy(
            update={"tpot_s": xt, "prefill_s": xp, "ttft_s": x.ttft_s - x.prefill_s + xp, "tokens_per_s": seqs / xt}
        )
    speed = sp.model_copy(
        update={
            "tpot_s": tpot,
            "prefill_s": prefill,
            "ttft_s": prefill + tpot,
            "tokens_per_s": seqs / tpot,
            "expected": x,
        }
    )
    labels = [x.label() for x in found]
    return e.model_copy(update={"speed": speed, "assumptions": e.assumptions + labels}), labels


def expected(
    f: Facts,
    before: Estimate,
    after: Estimate,
    s_before: Setup,
    s_after: Setup,
    note: str | None = None,
    factors_before: list[str] | None = None,
    factors_after: list[str] | None = None,
) -> Expected:
    """The move's effect as the estimator sees it; `note`: what it cannot see (the technique's own words)."""
    wb, wa = worst_device(before), worst_device(after)
    tb, ta = serving_times(f, s_before, before), serving_times(f, s_after, after)
    xb, xa = before.speed.expected or before.speed, after.speed.expected or after.speed  # expected ranks
    return Expected(
        peak_bytes_before=wb.needed_bytes if wb else before.memory.total_bytes,
        peak_bytes_after=wa.needed_bytes if wa else after.memory.total_bytes,
        fits_before=bool(wb and wb.fits),
        fits_after=bool(wa and wa.fits),
        ttft_s_before=xb.ttft_s + tb["queue_wait_mean_s"],
        ttft_s_after=xa.ttft_s + ta["queue_wait_mean_s"],
        tpot_s_before=xb.tpot_s,
        tpot_s_after=xa.tpot_s,
        tpot_bound_s_before=before.speed.tpot_s,
        tpot_bound_s_after=after.speed.tpot_s,
        tokens_per_s_before=tb["tokens_per_s"],
        tokens_per_s_after=ta["tokens_per_s"],
        max_input_len_after=after.max_input_len,
        max_concurrency_after=after.max_concurrency,
        max_concurrency_before=before.max_concurrency,
        weights_bytes_before=before.memory.weights_bytes,
        weights_bytes_after=after.memory.weights_bytes,
        note=note,
        factors_before=factors_before or [],
        factors_after=factors_after or [],
    )


def relief(x: Expected, category: str) -> float:
    """How much better the move makes what hurts (> 1: better)."""
    if category in MEMORY:
        return x.peak_bytes_before / max(x.peak_bytes_after, 1)
    if category == "decode-speed":
        return x.tpot_s_before / x.tpot_s_after
    if category == "prefill-speed":
        return x.ttft_s_before / x.ttft_s_after
    if category == "concurrency":
        gain = max(x.tokens_per_s_after / max(x.tokens_per_s_before, 1e-12), x.ttft_s_before / x.ttft_s_after)
        if not x.fits_before and x.max_concurrency_before and x.max_concurrency_after:
            # requests queue for KV room: more sequences in flight is the relief
            gain = max(gain, x.max_concurrency_after / x.max_concurrency_before)
        return gain
    return 1.0


def runs(c: Candidate, category: str) -> bool:
    """The move runs this workload: it fits, or (queueing) it admits requests as their KV cache fits, the rest
    waiting their turn: a batching scheduler that holds two or more sequences at once, or a move that lets more
    in where they were queueing for KV room already."""
    x = c.expected
    if x.fits_after:
        return True
    if category != "concurrency":
        return False
    admitted = x.max_concurrency_after or 0
    return (c.setup.batching == "continuous" and admitted >= 2) or (
        not x.fits_before and admitted > (x.max_concurrency_before or 0)
    )


def helps(c: Candidate, category: str, severity: str) -> bool:
    x = c.expected
    if REGISTRY[c.technique].cures_known_problem:  # addresses a category only when its known problem is about it
        # a problem the estimate does not model explains memory trouble only where the estimate fits
        return x.tpot_s_after < x.tpot_s_before * 0.95 or x.fits_before
    if severity == "blocking" or category in MEMORY:
        return x.peak_bytes_after < x.peak_bytes_before or (x.fits_after and not x.fits_before)
    if not runs(c, category):
        return False
    return relief(x, category) > 1.05 or (x.note is not None and category in ("decode-speed", "prefill-speed"))


def rank_key(f: Facts, c: Candidate, category: str, severity: str) -> tuple:
    """Where the move ranks for a finding: the smaller, the sooner (the module's docstring has the order)."""
    x, needs_hardware, questions = c.expected, c.needs_hardware is not None, c.open_questions
    prio = REGISTRY[c.technique].rank(f)
    if severity == "blocking":
        slow = x.tpot_s_after > SLOWER * x.tpot_s_before
        return (not x.fits_after, needs_hardware, slow, RISK_ORDER[c.quality_risk], questions, prio, x.peak_bytes_after)
    g = relief(x, category)
    tier = 0 if g >= REAL_GAIN else (1 if x.note else 2)
    # a gain the roofline cannot show (compile, fused kernels) is as uncertain as a small quality risk
    doubt = RISK_ORDER[c.quality_risk] + (tier > 0)
    band = math.floor(math.log2(max(g, 1e-9)))  # gains within the same power of two tie: the cheaper move first
    return (needs_hardware, not runs(c, category), doubt, tier, questions, -band, prio, -g)


# --- evidence: what the user saw against the expected, and the known slow paths a move leaves -------------------

GAP = 2.0  # observed beyond this multiple of the expected: a symptom the estimate does not explain


class Gap(BaseModel):
    category: Literal["decode-speed", "prefill-speed", "concurrency"]
    ratio: float  # observed / expected (> 1: slower than expected)
    line: str
    limit: float = GAP  # the speed model's error for this kind of row: GAP, or its validated band's top if wider

    @property
    def beyond(self) -> bool:
        """Far beyond the expected: a symptom the estimate does not explain."""
        return self.ratio > self.limit


def observed_gaps(f: Facts, s: Setup, base: Estimate) -> list[Gap]:
    """The speeds the user saw (Facts.observed) against the expected ones of the current setup (its estimate with
    the documented factors folded in), largest ratio first; `beyond`: more than GAP times the expected."""
    o = f.observed
    if o is None:
        return []
    sp = base.speed
    x = sp.expected or sp
    t = serving_times(f, s, base)
    # where the validation measured a wider band for this kind of row (MoE decode: measured 3.9-5.6x the
    # expected), an observation inside it is the model's own error, not a slow path
    decode, ttft_limit = (max(GAP, b.high) if b is not None else GAP for b in (sp.band_tpot, sp.band_ttft))
    seen: list[tuple[Literal["decode-speed", "prefill-speed", "concurrency"], float, str, float]] = []
    if o.tpot_s and x.tpot_s:
        what = f"{o.tpot_s * 1e3:.0f} ms per token vs {x.tpot_s * 1e3:.1f}"
        seen.append(("decode-speed", o.tpot_s / x.tpot_s, what, decode))
    if o.tokens_per_s and t["tokens_per_s"]:
        what = f"{o.tokens_per_s:.1f} tokens/s vs {t['tokens_per_s']:.1f}"
        seen.append(("decode-speed", t["tokens_per_s"] / o.tokens_per_s, what, decode))
    if o.e2e_s and t["e2e_s"]:
        expected_e2e = t["e2e_s"] + t["queue_wait_mean_s"]
        what = f"{o.e2e_s:.2f} s per request vs {expected_e2e:.2f} s"
        # where waiting behind other requests is most of a request's expected time, its end-to-end time is queueing
        queued = t["queue_wait_mean_s"] > t["e2e_s"]
        seen.append(("concurrency" if queued else "decode-speed", o.e2e_s / expected_e2e, what, decode))
    if o.ttft_s and x.ttft_s:
        # under concurrent requests a long first token is queueing (requests waiting for a slot or KV room); a batch
        # in one generate call waits for nothing: its first token is its prefill's
        queued = f.concurrency > 1 or t["queue_wait_mean_s"] > x.ttft_s
        ttft = x.ttft_s + t["queue_wait_mean_s"]
        what = f"TTFT {o.ttft_s * 1e3:.0f} ms vs {ttft * 1e3:.0f}"
        seen.append(("concurrency" if queued else "prefill-speed", o.ttft_s / ttft, what, ttft_limit))
    gaps = [
        Gap(
            category=cat,
            ratio=r,
            limit=limit,
            line=(
                f"observed {1 / r:.1f}x faster than the expected ({what} expected): what runs is lighter than the "
                "setup as stated (another placement, quantization or dtype?): say it as it runs"
                if r < 1 / limit
                else f"observed {r:.1f}x the expected ({what} expected)"
                + (
                    ": the setup runs a slow path the estimate does not price"
                    if r > limit
                    else ": within the speed model's error"
                    + (f" (measured {limit:.1f}x the expected on this kind of row)" if limit > GAP else "")
                )
            ),
        )
        for cat, r, what, limit in seen
    ]
    return sorted(gaps, key=lambda g: -g.ratio)


def cures(f: Facts, current: Setup, c: Candidate, category: str, maybe: bool) -> list[slow_paths.SlowPath]:
    """The known slow paths of `current` with this symptom that the move leaves (it is among their cures and
    their conditions no longer hold after it). `maybe`: also those that hold but for an unstated version."""
    symptom = "memory" if category in MEMORY else category
    return [
        p
        for p in slow_paths.matching(f, current, maybe)
        if symptom in p.symptoms and c.technique in p.cures and p.holds(f, c.setup) is False
    ]

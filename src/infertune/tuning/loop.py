"""The tuning loop: baseline, then one change at a time, each measured against the incumbent in
interleaved repeats, quality-gated, and kept, rejected or left inconclusive, never on a difference
smaller than its own measured noise (measure/stats.py). Every finished step is appended to the run
directory (tuning/run.py) before the next trial starts, so `--resume` re-runs no finished step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from infertune.advisor.advise import moves_to_try
from infertune.advisor.moves import Candidate
from infertune.core.errors import UserError
from infertune.measure import run_trial
from infertune.measure.machine import combine
from infertune.measure.quality import REFERENCE_TEXT, Quality, compare
from infertune.measure.results import TrialResult
from infertune.techniques import Facts, Setup
from infertune.techniques.render import config_for
from infertune.tuning.run import Constraints, Run, Step, TuneSpec
from infertune.tuning.verdict import TIE_AXIS, Pair, decide, objective_value


def violations(c: Constraints, t: TrialResult) -> list[str]:
    m = t.metrics
    if m is None:
        return []
    out = []
    if c.max_memory_bytes is not None and m.peak_memory_bytes > c.max_memory_bytes:
        out.append(f"peak memory {m.peak_memory_bytes / 2**20:,.0f} MiB > {c.max_memory_bytes / 2**20:,.0f} MiB")
    if c.max_ttft_s is not None and m.ttft_s > c.max_ttft_s:
        out.append(f"TTFT {m.ttft_s:.3f} s > {c.max_ttft_s} s")
    if c.max_tpot_s is not None and m.tpot_s is not None and m.tpot_s > c.max_tpot_s:
        out.append(f"time per token {m.tpot_s:.4f} s > {c.max_tpot_s} s")
    return out


def measurable(s: Setup) -> bool:
    """What a trial can run in one process on one device (serial, static or continuous batching)."""
    return s.engine == "transformers" and s.tp == 1 and s.device_map is None


def candidates(f: Facts, best: Setup, tried: set[str]) -> list[Candidate]:
    """Runnable-here moves from `best`, as the advisor built them (its ranking first, then the rest in the
    expert's order), one per technique. A move with an open item (a package to install, a question) is not
    runnable here and now."""
    out: list[Candidate] = []
    seen = set(tried)
    for c in moves_to_try(f, best):
        if c.technique in seen or c.compatibility.issues or not measurable(c.setup) or c.setup == best:
            continue
        seen.add(c.technique)
        out.append(c)
    return out


def precheck(spec: TuneSpec, f: Facts) -> None:
    """Refuse constraints no candidate can meet, before any trial (on the advisor's estimates of the moves)."""
    cap = spec.constraints.max_memory_bytes
    if cap is None:
        return
    moves = moves_to_try(f, spec.start)
    if not moves:
        return
    weights = [moves[0].expected.weights_bytes_before] + [c.expected.weights_bytes_after for c in moves]
    lightest = min(w for w in weights if w is not None)
    if cap < lightest:
        raise UserError(
            f"--max-memory {cap / 2**20:,.0f} MiB is below the weights of every candidate "
            f"(lightest: {lightest / 2**20:,.0f} MiB, estimate): nothing to try"
        )


def tune(
    run: Run,
    facts: Facts,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    executor: Callable[..., TrialResult] | None = None,
) -> list[Step]:
    """Run (or continue) the loop until no candidate is left or the trial/time budget is spent.

    `executor`: what runs one trial (run_trial's arguments); measure/cluster.py's RayExecutor puts it on Ray."""
    spec = run.spec()
    steps = run.steps()
    emit = on_event or (lambda e: None)
    spent = sum(s.duration_s or s.trial.duration_s or 0 for s in steps)
    began = time.monotonic()

    def trial(index: int, setup: Setup, role: str = "candidate", repeat: int = 1, scored: bool = True) -> TrialResult:
        emit({"event": "trial", "index": index, "setup": setup, "role": role, "repeat": repeat})
        return (executor or run_trial)(
            config_for(setup, facts.accelerator.bf16),
            spec.workload,
            spec.model_path,
            timeout_s=spec.trial_timeout_s,
            on_event=emit,
            reference_text=REFERENCE_TEXT if scored else None,
            logprobs_path=run.logprobs(index) if scored else None,
            memory_limit_bytes=spec.trial_memory_limit_bytes,
        )

    if not steps:
        t = trial(0, spec.start, role="baseline")
        ok = t.status == "ok"
        floor, pilot = None, [t]
        if ok:  # the pilot: the baseline once more, its repeat-to-repeat spread is the run's noise floor
            pilot.append(trial(0, spec.start, role="baseline", repeat=2, scored=False))
            first, second = (objective_value(spec.objective, x) for x in pilot)
            if first and second is not None:
                floor = abs(second / first - 1)
        base = Step(
            index=0,
            technique=None,
            changes={},
            setup=spec.start,
            expected=None,
            trial=t,
            quality=None,
            objective=objective_value(spec.objective, t),
            accepted=ok,
            reason="baseline" if ok else f"baseline failed ({t.status}): {t.error}",
            machine=t.machine if len(pilot) == 1 else combine([x.machine for x in pilot]),
            duration_s=t.duration_s if len(pilot) == 1 else sum(x.duration_s or 0 for x in pilot),
            noise_floor=floor,
        )
        run.append(base)
        steps.append(base)
        emit({"event": "step", "step": base})
    baseline = steps[0]
    if not baseline.accepted:
        return steps
    best = max((s for s in steps if s.accepted), key=lambda s: s.index)
    tried = {s.technique for s in steps if s.technique}
    out_of_time = False
    while len(steps) < spec.max_trials:
        if spec.time_budget_s is not None and spent + (time.monotonic() - began) >= spec.time_budget_s:
            emit({"event": "budget", "reason": "time budget spent"})
            out_of_time = True
            break
        pool = candidates(facts, best.setup, tried)
        if not pool:
            break
        move = pool[0]
        tried.add(move.technique)
        step = _step(spec, len(steps), move, best, baseline, run, trial, floor=baseline.noise_floor)
        run.append(step)
        steps.append(step)
        emit({"event": "step", "step": step})
        if step.accepted:
            best = step
    if spec.confirm and not out_of_time and (checked := _confirm(spec, steps, trial)) is not None:
        run.append(checked)
        steps = [checked if s.index == checked.index else s for s in steps]
        emit({"event": "step", "step": checked})
    return steps


# Sequential stopping: a candidate whose every pair so far loses by more than LOSER_FLOORS times the run's
# noise floor (the baseline pilot), and by at least LOSER_MIN, is rejected at once, from the first pair on;
# everything else runs min_pairs and, while unclear, up to max_pairs (docs/tuning.md, "When a step stops").
LOSER_FLOORS = 3.0
LOSER_MIN = 0.20
FLOOR_MIN = 0.02  # a pilot of two equal numbers does not make a noise-free machine
CLEAR_LOSER = "a clear loser"  # how _interleave says it stopped on the loser rule (what _step reads back)


def loser_threshold(floor: float | None) -> float | None:
    """The loss on the objective beyond which one pair rejects a candidate (None: no pilot, no early stop)."""
    return None if floor is None else max(LOSER_FLOORS * max(floor, FLOOR_MIN), LOSER_MIN)


CONFIRM_MARGIN = 0.10  # a kept change whose band's near edge gains less than this is re-checked at the end


def _confirm(spec: TuneSpec, steps: list[Step], trial: Callable[..., TrialResult]) -> Step | None:
    """The last kept change, measured again against the setup before it in new interleaved pairs (the order
    reversed from its step), pooled with its step's pairs and decided again: minutes can pass between a step
    and the end of the run, and a drift the step's own band did not see shows here. None when there is
    nothing to re-check: the last adopted change was kept on the tie rule, by a wide margin, or checked already."""
    accepted = [s for s in steps if s.accepted]
    best = accepted[-1]
    if (
        len(accepted) < 2
        or best.verdict != "kept"
        or best.confirm_pairs
        or best.delta is None
        or best.noise is None
        or abs(best.delta) - best.noise >= CONFIRM_MARGIN
    ):
        return None
    before = accepted[-2]
    new, trials, _, _ = _interleave(
        spec, trial, best.index, best.setup, before.setup, prior=best.pairs, candidate_first=False
    )
    if len(new) < 2:
        return None
    pairs = best.pairs + new
    d = decide(spec.objective, pairs)
    why = (
        f"re-checked at the end of the run: {len(new)} more pairs against {_label(before)}, pooled with the "
        f"step's {len(best.pairs)}: "
    ) + d.reason
    return best.model_copy(
        update={
            "pairs": pairs,
            "confirm_pairs": len(new),
            "accepted": d.accepted,
            "verdict": d.verdict,
            "delta": d.delta,
            "noise": d.noise,
            "tie": d.tie,
            "objective": float(np.median([p.candidate for p in pairs])),
            "reason": why + ("" if d.accepted else f"; the change is undone: {_label(before)} stays"),
            "machine": combine([best.machine, *(t.machine for t in trials)]),
            "duration_s": (best.duration_s or 0) + sum(t.duration_s or 0 for t in trials),
        }
    )


def _label(step: Step) -> str:
    return f"step {step.index} ({step.technique or 'baseline'})"


def _interleave(
    spec: TuneSpec,
    trial: Callable[..., TrialResult],
    index: int,
    candidate: Setup,
    incumbent: Setup,
    prior: Sequence[Pair] = (),
    candidate_first: bool = True,
    gate: Callable[[TrialResult, bool], str | None] | None = None,
    loser: float | None = None,
) -> tuple[list[Pair], list[TrialResult], str | None, str]:
    """Interleaved pairs of the candidate and the incumbent, the order alternating from `candidate_first`, until
    the objective's difference over `prior` and the new pairs is clear of its noise (from min_pairs new ones)
    or max_pairs are spent. A pair with a failed trial is lost, its budget spent. `gate` sees each candidate
    trial (and whether it is the first, the one scored for quality) and may refuse the candidate at once: then
    (the pairs so far, every trial, why). With `loser` (a loss threshold), pairs that all lose by more than it
    stop at once. Last: why the pairs stopped."""
    pairs: list[Pair] = []
    trials: list[TrialResult] = []
    for k in range(spec.max_pairs):
        runs: dict[str, TrialResult] = {}
        for role in ("candidate", "incumbent") if (k % 2 == 0) == candidate_first else ("incumbent", "candidate"):
            t = trial(
                index,
                candidate if role == "candidate" else incumbent,
                role,
                len(prior) + k + 1,
                scored=gate is not None and role == "candidate" and k == 0,
            )
            trials.append(t)
            runs[role] = t
            if gate is not None and role == "candidate" and (refused := gate(t, k == 0)):
                return pairs, trials, refused, f"refused after {len(pairs) + 1} pair(s)"
        if any(t.status != "ok" for t in runs.values()):
            continue
        pairs.append(_pair(spec, runs["incumbent"], runs["candidate"]))
        if loser is not None and not prior and all(_loss(spec, p) > loser and not p.busy for p in pairs):
            return pairs, trials, None, f"stopped after {len(pairs)} pair(s): {CLEAR_LOSER} (each lost > {loser:.0%})"
        if len(pairs) >= spec.min_pairs and decide(spec.objective, [*prior, *pairs]).verdict != "inconclusive":
            return pairs, trials, None, f"stopped after {len(pairs)} pairs: the verdict is clear"
    return pairs, trials, None, f"{len(pairs)} pairs: the budget of {spec.max_pairs} spent on a close call"


def _loss(spec: TuneSpec, p: Pair) -> float:
    """How much worse the candidate is than the incumbent in one pair (negative: better)."""
    if p.incumbent <= 0:
        return 0.0
    r = p.candidate / p.incumbent - 1
    return -r if spec.objective == "throughput" else r


def _pair(spec: TuneSpec, inc: TrialResult, cand: TrialResult) -> Pair:
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


def _step(
    spec: TuneSpec,
    index: int,
    move: Candidate,
    best: Step,
    baseline: Step,
    run: Run,
    trial: Callable[..., TrialResult],
    floor: float | None = None,
) -> Step:
    """One candidate against the incumbent in interleaved pairs (candidate first in odd pairs, incumbent
    first in even ones), until the objective's difference is clear of its noise or max_pairs are spent.
    The candidate's first trial is checked for quality against the baseline and against the constraints;
    a failure there (or a failed candidate trial) rejects it at once, not on the objective."""
    quality: Quality | None = None

    def gate(t: TrialResult, first: bool) -> str | None:
        nonlocal quality
        if t.status != "ok":
            return f"trial {t.status}: {t.error}"
        if not first:
            return None
        quality = compare(baseline.trial, t, run.logprobs(0), run.logprobs(index), spec.tolerance)
        broken = violations(spec.constraints, t)
        if not quality.passed:
            return "quality: " + "; ".join(quality.reasons)
        return "constraint: " + "; ".join(broken) if broken else None

    # refused: why it was rejected other than on the objective (a failed candidate trial, quality, a constraint)
    loser = loser_threshold(floor)
    pairs, trials, refused, stopped = _interleave(spec, trial, index, move.setup, best.setup, gate=gate, loser=loser)
    first = trials[0]  # the candidate's first, quality-checked trial (pair 1 runs the candidate first)
    common: dict[str, Any] = {
        "index": index,
        "technique": move.technique,
        "changes": move.settings,
        "setup": move.setup,
        "expected": move.expected,  # as the advisor built it: never computed again
        "trial": first,
        "quality": quality,
        "pairs": pairs,
        "machine": combine([t.machine for t in trials]),
        "duration_s": sum(t.duration_s or 0 for t in trials),
        "stopped": stopped,
    }
    if len(pairs) == 1 and refused is None and CLEAR_LOSER in stopped:
        delta = pairs[0].candidate / pairs[0].incumbent - 1
        return Step(
            **common,
            objective=pairs[0].candidate,
            accepted=False,
            verdict="rejected",
            delta=delta,
            noise=floor,
            reason=f"{spec.objective} {delta:+.1%} in 1 interleaved pair, a loss beyond {loser:.0%} "
            f"({LOSER_FLOORS:g}x the run's noise floor ±{floor or 0:.1%}, at least {LOSER_MIN:.0%}): "
            "rejected as a clear loser after one pair",
        )
    if refused is not None:
        return Step(
            **common,
            objective=objective_value(spec.objective, first),
            accepted=False,
            verdict="rejected",
            reason=refused,
        )
    if len(pairs) < 2:
        return Step(
            **common,
            objective=objective_value(spec.objective, first),
            accepted=False,
            verdict="inconclusive",
            reason=f"only {len(pairs)} usable pair(s): the incumbent's trials failed",
        )
    d = decide(spec.objective, pairs)
    return Step(
        **common,
        objective=float(np.median([p.candidate for p in pairs])),
        accepted=d.accepted,
        verdict=d.verdict,
        delta=d.delta,
        noise=d.noise,
        tie=d.tie,
        reason=d.reason,
    )

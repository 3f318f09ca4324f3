"""The tuning loop: baseline, then one change at a time, each measured against the incumbent in
interleaved repeats, quality-gated, and kept, rejected or left inconclusive, never on a difference
smaller than its own measured noise (measure/stats.py). Every finished step is appended to the run
directory (tuning/run.py) before the next trial starts, so `--resume` re-runs no finished step.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from infertune.advisor.advise import moves_to_try
from infertune.advisor.moves import Candidate
from infertune.core.errors import UserError
from infertune.measure import run_trial
from infertune.measure.machine import combine
from infertune.measure.quality import REFERENCE_TEXT, Quality, compare
from infertune.measure.results import TrialResult
from infertune.measure.zygote import warm_start
from infertune.techniques import REGISTRY, Facts, Setup
from infertune.techniques.render import config_for
from infertune.tuning.ahead import Ahead
from infertune.tuning.confirm import confirm, undone
from infertune.tuning.interleave import interleave
from infertune.tuning.run import Constraints, Run, Step, TuneSpec
from infertune.tuning.sequential import CLEAR_LOSER, CLEAR_MIN, LOSER_FLOORS, clear_threshold
from infertune.tuning.verdict import decide, objective_value


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
    expert's order, less those whose estimate sees no difference at all), one per technique. A move with an open
    item (a package to install, a question) is not runnable here and now."""
    out: list[Candidate] = []
    seen = set(tried)
    for c in moves_to_try(f, best, worth_a_trial=True):
        if c.technique in seen or c.compatibility.issues or not measurable(c.setup) or c.setup == best:
            continue
        seen.add(c.technique)
        out.append(c)
    return out


def _estimated_after(c: Candidate | Step) -> tuple | None:
    """What the estimate says a move leads to, on every axis it prices: two moves with the same are one to it."""
    e, family = c.expected, REGISTRY[c.technique].family if c.technique else None
    if e is None:
        return None
    return (
        family,
        e.ttft_s_after,
        e.tpot_s_after,
        e.peak_bytes_after,
        e.max_concurrency_after,
        e.factors_after,
        e.note,
    )


def twin_of(c: Candidate, steps: list[Step], best: Step) -> Step | None:
    """A step measured from the same incumbent with a move of the same family whose estimate is the candidate's on
    every axis (FlexAttention after sdpa was measured from eager and not adopted): measuring the twin would test
    only what the estimate has no term for, at the price of a step. None when there is none."""
    after = _estimated_after(c)
    return next(
        (
            s
            for s in steps
            if s.index > best.index and s.technique and not s.accepted and after and _estimated_after(s) == after
        ),
        None,
    )


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

    `executor`: what runs one trial (run_trial's arguments); measure/cluster.py's RayExecutor puts it on Ray.
    Local trials fork from one warm process that has imported torch and transformers (measure/zygote.py)."""
    with warm_start(run.spec().model_path, enabled=executor is None):
        return _tune(run, facts, on_event, executor)


def _tune(
    run: Run,
    facts: Facts,
    on_event: Callable[[dict[str, Any]], None] | None,
    executor: Callable[..., TrialResult] | None,
) -> list[Step]:
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

    def pilot(index: int, setup: Setup, first: TrialResult) -> tuple[float | None, list[TrialResult]]:
        """`first` and one more trial of `setup`: their repeat-to-repeat spread is the run's noise floor."""
        second = trial(index, setup, role="pilot", repeat=2, scored=False)
        a, b = (objective_value(spec.objective, x) for x in (first, second))
        return (abs(b / a - 1) if a and b is not None else None), [first, second]

    if not steps:
        _pin(executor)
        t = trial(0, spec.start, role="baseline")
        ok = t.status == "ok"
        floor, piloted = pilot(0, spec.start, t) if ok else (None, [t])
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
            machine=combine([x.machine for x in piloted]),
            duration_s=sum(x.duration_s or 0 for x in piloted),
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
    ahead = Ahead(executor, lambda i, m, b, f: _step(spec, i, m, b, baseline, run, trial, floor=f))
    while len(steps) < spec.max_trials:
        if spec.time_budget_s is not None and spent + (time.monotonic() - began) >= spec.time_budget_s:
            emit({"event": "budget", "reason": "time budget spent"})
            out_of_time = True
            break
        pool = [c for c in candidates(facts, best.setup, tried) if twin_of(c, steps, best) is None]
        if not pool:
            break
        move = pool[0]
        tried.add(move.technique)
        _pin(executor)  # this step's trials (its pilot and its pairs) on one node and one device
        floored = [s for s in steps if s.noise_floor is not None]
        floor = floored[-1].noise_floor if floored else None
        extra: list[TrialResult] = []
        if floored and _busy(steps[-1]) != _busy(floored[-1]):  # the machine's load changed: measure it again
            first = trial(len(steps), best.setup, role="pilot", scored=False)
            if first.status == "ok":
                floor, extra = pilot(len(steps), best.setup, first)
        step = ahead.take(len(steps), move, best, floor, remeasured=bool(extra))  # measured ahead: as it is
        if step is None:
            ahead.start(len(steps), pool[1 : spec.max_trials - len(steps)], best, floor)  # the next, on other lanes
            step = _step(spec, len(steps), move, best, baseline, run, trial, floor=floor, pilot=extra)
            ahead.settle()
        run.append(step)
        steps.append(step)
        emit({"event": "step", "step": step})
        if step.accepted:
            best = step
    ahead.close()
    if spec.confirm and not out_of_time and run.confirmation() is None:
        floors = [s.noise_floor for s in steps if s.noise_floor is not None]
        _pin(executor)
        c = confirm(spec, steps, trial, floors[-1] if floors else None)
        if c is not None:
            run.save_confirmation(c)
            emit({"event": "confirm", "confirmation": c})
            if c.outcome == "reversed":
                for u in undone(steps, c):
                    run.append(u)
                    steps = [u if s.index == u.index else s for s in steps]
                    emit({"event": "step", "step": u})
    return steps


def _pin(executor: Callable[..., TrialResult] | None) -> None:
    """The trials from here to the next pin run on one node and one device, where the executor places trials
    (a Ray cluster: measure/cluster.py's RayExecutor.pin): a step's pairs are never split across devices."""
    pin = getattr(executor, "pin", None)
    if pin is not None:
        pin()


def _busy(step: Step) -> bool:
    load = step.machine or step.trial.machine
    return bool(load and load.busy)


def _step(
    spec: TuneSpec,
    index: int,
    move: Candidate,
    best: Step,
    baseline: Step,
    run: Run,
    trial: Callable[..., TrialResult],
    floor: float | None = None,
    pilot: list[TrialResult] | None = None,
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
    threshold = clear_threshold(floor)
    pairs, trials, refused, stopped = interleave(
        spec, trial, index, move.setup, best.setup, gate=gate, threshold=threshold
    )
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
        "machine": combine([t.machine for t in [*(pilot or []), *trials]]),
        "duration_s": sum(t.duration_s or 0 for t in [*(pilot or []), *trials]),
        "stopped": stopped,
        "noise_floor": floor if pilot else None,  # measured again for this step (the machine's load changed)
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
            reason=f"{spec.objective} {delta:+.1%} in 1 interleaved pair, a loss beyond {threshold:.0%} "
            f"({LOSER_FLOORS:g}x the run's noise floor ±{floor or 0:.1%}, at least {CLEAR_MIN:.0%}): "
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

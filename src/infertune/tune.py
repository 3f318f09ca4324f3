"""The tuning loop: baseline, then one change at a time, each measured, quality-gated, kept or rejected.

State lives in the run directory, written as it comes: `spec.json` (what was asked), `results.jsonl`
(one line per finished step, flushed and fsynced), `logprobs/` (reference log-probs per trial, for the
KL check). `resume` rebuilds the state from those files and re-runs no finished step.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from infertune import human
from infertune.advise import Expected, _expected, advise
from infertune.errors import UserError
from infertune.measure import run_trial
from infertune.measure.quality import REFERENCE_TEXT, Quality, Tolerance, compare
from infertune.measure.results import TrialResult
from infertune.paths import write_json_atomic
from infertune.render import config_for, estimate_setup, serve_flags_for
from infertune.serving.trial import ServeTrial, run_serve_trial
from infertune.techniques import REGISTRY, Facts, Setup
from infertune.workload import Workload

Objective = Literal["memory", "latency", "throughput"]
MIN_GAIN = 0.02  # a change must beat the best by 2 % on the objective: below that is run-to-run noise
# A tie on the objective (within MIN_GAIN either way) is broken by a clear gain on the other axis: memory for
# a latency or throughput objective, latency for a memory objective. bf16 on a CPU without native bf16 is
# the case in point: the same latency (slower prefill, faster decode) at half the memory.
TIE_GAIN = 0.10
TIE_AXIS: dict[str, Objective] = {"latency": "memory", "throughput": "memory", "memory": "latency"}


class Constraints(BaseModel):
    max_memory_bytes: int | None = None  # the trial's peak (CPU: process RSS; CUDA: allocated)
    max_ttft_s: float | None = None
    max_tpot_s: float | None = None


class TuneSpec(BaseModel):
    kind: Literal["tune-spec"] = "tune-spec"
    model: str  # as the user named it
    model_path: str
    workload: Workload
    start: Setup
    objective: Objective = "latency"
    constraints: Constraints = Field(default_factory=Constraints)
    tolerance: Tolerance = Field(default_factory=Tolerance)
    max_trials: int = 8
    time_budget_s: float | None = None
    trial_timeout_s: float = 900.0
    trial_memory_limit_bytes: int | None = None  # past it a trial is "oom" (worker.limit_memory)
    serve: bool = False  # after the loop, serve the accepted setup (and its batching variant) and load-test both


class Step(BaseModel):
    kind: Literal["tune-step"] = "tune-step"
    index: int
    technique: str | None  # None: the baseline
    changes: dict[str, Any]
    setup: Setup
    expected: Expected | None  # the estimate it was chosen on (kind "estimate")
    trial: TrialResult  # what was measured (kind "measured")
    quality: Quality | None
    objective: float | None  # the objective's measured value (bytes, seconds or tokens/s)
    accepted: bool
    reason: str


class ServeStep(BaseModel):
    """The accepted setup served by `transformers serve`, one flag variant, load-tested (measured)."""

    kind: Literal["serve-step"] = "serve-step"
    label: str
    flags: list[str]
    trial: ServeTrial | None  # None: the server did not come up (error says why)
    error: str | None = None
    objective: float | None  # at the workload's concurrency: e2e p50 s, output tokens/s, or server peak RSS


def objective_value(objective: Objective, t: TrialResult) -> float | None:
    m = t.metrics
    if t.status != "ok" or m is None:
        return None
    # memory: the trial's peak above what the process held before the model load (on CPU the Python/torch
    # runtime; on CUDA ~0), so the 2 % threshold applies to what the configuration changes
    memory = float(m.peak_memory_bytes - m.baseline_memory_bytes)
    return {"memory": memory, "latency": m.e2e_s, "throughput": m.tokens_per_s}[objective]


def better(objective: Objective, new: float, old: float) -> bool:
    return new > old * (1 + MIN_GAIN) if objective == "throughput" else new < old * (1 - MIN_GAIN)


def tie_break(objective: Objective, new: TrialResult, best: Step) -> str | None:
    """Why a change that does not beat the objective is kept anyway (None: it is not): the objective is
    not worse by more than MIN_GAIN, and the other axis (TIE_AXIS) gains at least TIE_GAIN."""
    value, old = objective_value(objective, new), best.objective
    axis = TIE_AXIS[objective]
    a, b = objective_value(axis, new), objective_value(axis, best.trial)
    if value is None or old is None or a is None or b is None:
        return None
    worse = value < old * (1 - MIN_GAIN) if objective == "throughput" else value > old * (1 + MIN_GAIN)
    if worse or not a < b * (1 - TIE_GAIN):
        return None
    return (f"{objective} {human.objective(objective, value)} ties {human.objective(objective, old)} (within "
            f"{MIN_GAIN:.0%}); {axis} {human.objective(axis, b)} -> {human.objective(axis, a)} "
            f"(kept on the tie: >= {TIE_GAIN:.0%} better)")


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


def candidates(f: Facts, best: Setup, tried: set[str]) -> list[tuple[str, Setup]]:
    """Runnable-here changes from `best`, the advisor's ranking first, then the rest by priority."""
    advice = advise(f, best)
    ranked = [r.technique for r in advice.recommendations]
    rest = sorted((t for t in REGISTRY if t not in ranked), key=lambda t: REGISTRY[t].rank(f))
    out = []
    for tid in ranked + rest:
        t = REGISTRY[tid]
        if tid in tried or t.applied(best):
            continue
        c = t.check(f, best)
        if c.blockers or c.issues:  # an open issue (a package to install) is not runnable here and now
            continue
        after = t.apply(f, best)
        if measurable(after) and after != best:
            out.append((tid, after))
    return out


def precheck(spec: TuneSpec, f: Facts) -> None:
    """Refuse constraints no candidate can meet, before any trial."""
    cap = spec.constraints.max_memory_bytes
    if cap is None:
        return
    setups = [spec.start] + [s for _, s in candidates(f, spec.start, set())]
    lightest = min(estimate_setup(f, s).memory.weights_bytes for s in setups)
    if cap < lightest:
        raise UserError(f"--max-memory {cap / 2**20:,.0f} MiB is below the weights of every candidate "
                        f"(lightest: {lightest / 2**20:,.0f} MiB, estimate): nothing to try")


class Run:
    """A run directory: spec.json, results.jsonl, logprobs/."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.results = self.path / "results.jsonl"
        self.warnings: list[str] = []

    @classmethod
    def create(cls, path: Path, spec: TuneSpec) -> Run:
        path = Path(path)
        if (path / "results.jsonl").exists():
            raise UserError(f"{path} already holds a tune run: --resume {path} continues it")
        (path / "logprobs").mkdir(parents=True, exist_ok=True)
        write_json_atomic(path / "spec.json", spec.model_dump(mode="json"))
        return cls(path)

    def spec(self) -> TuneSpec:
        try:
            return TuneSpec.model_validate_json((self.path / "spec.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"{self.path} is not a tune run directory (no spec.json)") from None
        except ValueError as e:
            raise UserError(f"{self.path}/spec.json is unreadable: {str(e).splitlines()[0]}") from None

    def steps(self) -> list[Step]:
        """Finished steps; a truncated or corrupt line (a kill mid-write) is skipped with a warning."""
        return self._read(self.results, Step)

    def serve_steps(self) -> list[ServeStep]:
        return self._read(self.path / "serve.jsonl", ServeStep)

    def _read(self, path: Path, model: type[BaseModel]) -> list:
        if not path.exists():
            return []
        out = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(model.model_validate_json(line))
            except ValueError:
                self.warnings.append(f"{path.name} line {n} is incomplete (interrupted write): ignored")
        return out

    def append(self, step: Step | ServeStep) -> None:
        """One finished step, flushed and fsynced before the next trial starts. A write that fails (a full
        disk) stops the run with one line: every earlier line is intact and `--resume` re-runs this step."""
        path = self.results if isinstance(step, Step) else self.path / "serve.jsonl"
        try:
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(step.model_dump_json() + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as e:
            raise UserError(f"cannot write {path}: {e.strerror or e} (disk full?); the finished trials before "
                            f"this one are kept: free space, then infertune tune --resume {self.path}") from None

    def logprobs(self, index: int) -> Path:
        return self.path / "logprobs" / f"step-{index}.npy"


def tune(run: Run, facts: Facts, on_event: Callable[[dict[str, Any]], None] | None = None) -> list[Step]:
    """Run (or continue) the loop until no candidate is left or the trial/time budget is spent."""
    spec = run.spec()
    steps = run.steps()
    emit = on_event or (lambda e: None)
    spent = sum(s.trial.duration_s or 0 for s in steps)
    began = time.monotonic()

    def trial(index: int, setup: Setup) -> TrialResult:
        emit({"event": "trial", "index": index, "setup": setup})
        return run_trial(config_for(setup, facts.accelerator.bf16), spec.workload, spec.model_path,
                         timeout_s=spec.trial_timeout_s, on_event=emit, reference_text=REFERENCE_TEXT,
                         logprobs_path=run.logprobs(index), memory_limit_bytes=spec.trial_memory_limit_bytes)

    if not steps:
        t = trial(0, spec.start)
        ok = t.status == "ok"
        base = Step(index=0, technique=None, changes={}, setup=spec.start, expected=None, trial=t, quality=None,
                    objective=objective_value(spec.objective, t), accepted=ok,
                    reason="baseline" if ok else f"baseline failed ({t.status}): {t.error}")
        run.append(base)
        steps.append(base)
        emit({"event": "step", "step": base})
    baseline = steps[0]
    if not baseline.accepted:
        return steps
    best = max((s for s in steps if s.accepted), key=lambda s: s.index)
    tried = {s.technique for s in steps if s.technique}
    while len(steps) < spec.max_trials:
        if spec.time_budget_s is not None and spent + (time.monotonic() - began) >= spec.time_budget_s:
            emit({"event": "budget", "reason": "time budget spent"})
            break
        pool = candidates(facts, best.setup, tried)
        if not pool:
            break
        tid, setup = pool[0]
        tried.add(tid)
        index = len(steps)
        expected = _expected(facts, estimate_setup(facts, best.setup), estimate_setup(facts, setup), best.setup, setup)
        t = trial(index, setup)
        value = objective_value(spec.objective, t)
        quality = None
        if t.status != "ok":
            accepted, reason = False, f"trial {t.status}: {t.error}"
        else:
            quality = compare(baseline.trial, t, run.logprobs(0), run.logprobs(index), spec.tolerance)
            broken = violations(spec.constraints, t)
            if not quality.passed:
                accepted, reason = False, "quality: " + "; ".join(quality.reasons)
            elif broken:
                accepted, reason = False, "constraint: " + "; ".join(broken)
            elif not better(spec.objective, value, best.objective):
                tie = tie_break(spec.objective, t, best)
                accepted, reason = (True, tie) if tie else (
                    False, f"{spec.objective} {human.objective(spec.objective, value)} does not beat "
                    f"{human.objective(spec.objective, best.objective)} by {MIN_GAIN:.0%}")
            else:
                accepted, reason = True, (f"{spec.objective} {human.objective(spec.objective, best.objective)} -> "
                                            f"{human.objective(spec.objective, value)}")
        step = Step(index=index, technique=tid, changes=best.setup.changes(setup), setup=setup, expected=expected,
                    trial=t, quality=quality, objective=value, accepted=accepted, reason=reason)
        run.append(step)
        steps.append(step)
        emit({"event": "step", "step": step})
        if accepted:
            best = step
    return steps


def best_step(steps: list[Step]) -> Step | None:
    accepted = [s for s in steps if s.accepted]
    return accepted[-1] if accepted else None



# --- serving the result -----------------------------------------------------------------------------------


def serve_variants(f: Facts, s: Setup) -> list[tuple[str, list[str]]]:
    """The accepted setup's `transformers serve` flags, and the same with continuous batching switched
    (on as the technique applies it: no torch.compile, which serve refuses with it, and a paged cache sized
    to the workload). Empty when serve cannot run the setup."""
    if s.engine != "transformers" or s.tp > 1 or s.device_map is not None:
        return []
    if s.batching == "continuous":
        other = ("without continuous batching", s.model_copy(update={
            "batching": "serial", "max_batch_tokens": None, "cb_block_size": None, "cb_num_blocks": None}))
    else:
        other = ("with continuous batching", REGISTRY["continuous-batching"].apply(f, s))
    return [("as accepted", serve_flags_for(s)), (other[0], serve_flags_for(other[1]))]


def served_objective(objective: Objective, t: ServeTrial, concurrency: int) -> float | None:
    level = next((lv for lv in t.load.levels if lv.concurrency == concurrency), None)
    if level is None or level.requests_ok == 0:
        return None
    return {"memory": t.server_peak_rss_bytes, "latency": level.e2e_s.p50,
            "throughput": level.output_tokens_per_s}[objective]


def conversations(wl: Workload) -> list[list[dict]]:
    """The workload's prompts as chat requests (at their natural length: a server pads nothing)."""
    return [[{"role": "user", "content": p}] if isinstance(p, str) else [m.model_dump() for m in p]
            for p in wl.prompt_list()]


def serve_stage(run: Run, facts: Facts, best: Step, on_event: Callable[[dict[str, Any]], None] | None = None,
                ready_timeout_s: float = 300.0) -> list[ServeStep]:
    """Serve `best` (and its batching variant) at the workload's concurrency; each result appended to
    serve.jsonl as it comes; finished variants are not re-run on resume."""
    spec = run.spec()
    wl = spec.workload
    emit = on_event or (lambda e: None)
    done = run.serve_steps()
    for k, (label, flags) in enumerate(serve_variants(facts, best.setup)):
        if any(d.flags == flags for d in done):
            continue
        emit({"event": "serve", "label": label, "flags": flags})
        try:
            t = run_serve_trial(spec.model_path, flags, run.path / "serve" / f"server-{k}.log",
                                sorted({1, wl.concurrency}), wl.concurrency * max(2, wl.repeats), wl.max_new_tokens,
                                conversations(wl), ready_timeout_s=ready_timeout_s)
            step = ServeStep(label=label, flags=flags, trial=t, objective=served_objective(spec.objective, t,
                                                                                          wl.concurrency))
        except UserError as e:  # the server did not come up: that variant's result, the run goes on
            step = ServeStep(label=label, flags=flags, trial=None, error=str(e), objective=None)
        run.append(step)
        done.append(step)
        emit({"event": "served", "step": step})
    return done


def best_served(objective: Objective, served: list[ServeStep]) -> ServeStep | None:
    ok = [s for s in served if s.objective is not None]
    if not ok:
        return None
    pick = max if objective == "throughput" else min
    return pick(ok, key=lambda s: s.objective)

"""The tune run's records, at the bottom of the tuning package: what was asked (`TuneSpec`), each finished
step of the loop (`Step`) and of the serve stage (`ServeStep`), and the run directory that holds them (`Run`).

State lives in the run directory, written as it comes: `spec.json` (what was asked), `results.jsonl`
(one line per finished step, flushed and fsynced), `serve.jsonl` (the serve stage's variants), `logprobs/`
(reference log-probs per trial, for the KL check). `Run.steps` rebuilds the state from those files, so a
resumed run re-runs no finished step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from infertune.advisor.moves import Expected
from infertune.core.errors import UserError
from infertune.core.paths import append_line, write_json_atomic
from infertune.core.workload import Workload
from infertune.measure.machine import MachineLoad
from infertune.measure.quality import Quality, Tolerance
from infertune.measure.results import TrialResult
from infertune.measure.stats import Paired
from infertune.serving.trial import ServeTrial
from infertune.techniques import Setup
from infertune.tuning.verdict import Objective, Pair, Verdict


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
    min_pairs: int = Field(3, ge=2, description="interleaved incumbent/candidate pairs before a verdict")
    max_pairs: int = Field(5, ge=2, description="pairs at most: then the step is inconclusive if still unclear")
    serve: bool = False  # after the loop, serve the accepted setup (both batching modes, installed engines): served.py
    confirm: bool = Field(
        True,
        description="at the end of the run, measure the pick against the baseline again in fresh interleaved "
        "pairs (tuning/confirm.py): the gain reported is that one, not the draw that made it win",
    )


class Step(BaseModel):
    kind: Literal["tune-step"] = "tune-step"
    index: int
    technique: str | None  # None: the baseline
    changes: dict[str, Any]
    setup: Setup
    expected: Expected | None  # the estimate it was chosen on (kind "estimate")
    trial: TrialResult  # the candidate's first trial, quality-checked (kind "measured")
    quality: Quality | None
    objective: float | None  # the objective's measured value (bytes, seconds or tokens/s): median of the pairs
    accepted: bool  # the change was adopted (kept, or kept on the tie while the objective is inconclusive)
    reason: str
    verdict: Verdict | None = None  # on the objective; None for the baseline (nothing to compare it with)
    delta: float | None = None  # median paired change of the objective vs the incumbent (negative: lower)
    noise: float | None = None  # half-width of the band delta was judged against
    pairs: list[Pair] = Field(default_factory=list)
    tie: Paired | None = None  # the other axis, when the tie rule was weighed
    machine: MachineLoad | None = None  # how busy the machine was over this step's trials
    duration_s: float | None = None  # all of this step's trials
    noise_floor: float | None = None  # the baseline's pilot: |repeat / first - 1| of the objective (measured)
    stopped: str | None = None  # why the step's pairs stopped where they did


class Confirmation(BaseModel):
    """The run's pick measured again against the baseline at the end, in fresh interleaved pairs (measured)."""

    kind: Literal["tune-confirmation"] = "tune-confirmation"
    winner: int  # the index of the step whose setup was the pick
    outcome: Literal["confirmed", "not confirmed", "reversed"]
    reason: str
    verdict: Verdict | None = None  # the verdict rule on the fresh pairs (None: fewer than two)
    delta: float | None = None  # the pick against the baseline: median paired change of the objective
    noise: float | None = None
    tie: Paired | None = None
    pairs: list[Pair] = Field(default_factory=list)
    stopped: str | None = None
    machine: MachineLoad | None = None
    duration_s: float | None = None


class ServeStep(BaseModel):
    """One served variant of the accepted setup, load-tested (measured), or an engine that could not be."""

    kind: Literal["serve-step"] = "serve-step"
    label: str
    engine: str = "transformers"  # transformers (serve), vllm, sglang
    flags: list[str]
    trial: ServeTrial | None  # None: not measured (`install` says how to) or the server did not come up (`error`)
    error: str | None = None
    objective: float | None  # at the workload's concurrency, median of the rounds: e2e p50 s, tokens/s, peak bytes
    rounds: list[float] = Field(default_factory=list, description="the objective in each round (measured)")
    spread: float | None = Field(None, description="relative half-width of the rounds (None: one round)")
    slo_missed: list[str] = Field(default_factory=list, description="the limits this variant misses (measured)")
    install: str | None = Field(None, description="not measured: the command that installs the engine")

    @property
    def status(self) -> str:
        return "ok" if self.trial else ("not measured" if self.install else "failed")


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
        """Finished steps; a truncated or corrupt line (a kill mid-write) is skipped with a warning. A step
        re-checked at the end of the run has a later line of its own index: that one stands."""
        latest: dict[int, Step] = {}
        for step in self._read(self.results, Step):
            latest[step.index] = step
        return list(latest.values())

    def confirmation(self) -> Confirmation | None:
        """The end-of-run confirmation (confirm.json), None before it ran (or when it is unreadable)."""
        path = self.path / "confirm.json"
        if not path.exists():
            return None
        try:
            return Confirmation.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            self.warnings.append("confirm.json is incomplete (interrupted write): the confirmation runs again")
            return None

    def save_confirmation(self, c: Confirmation) -> None:
        write_json_atomic(self.path / "confirm.json", c.model_dump(mode="json"))

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
            append_line(path, step.model_dump_json())
        except OSError as e:
            raise UserError(
                f"cannot write {path}: {e.strerror or e} (disk full?); the finished trials before "
                f"this one are kept: free space, then infertune tune --resume {self.path}"
            ) from None

    def logprobs(self, index: int) -> Path:
        return self.path / "logprobs" / f"step-{index}.npy"


def best_step(steps: list[Step]) -> Step | None:
    accepted = [s for s in steps if s.accepted]
    return accepted[-1] if accepted else None

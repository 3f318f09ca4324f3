"""`infertune sweep`: one trial of every configuration of a grid over listed knobs (and of several models), fanned
out over a cluster's lanes (measure/cluster.py: a device each) or run here one after another.

A sweep ranks measurements; it makes no verdict and changes nothing of the tuning loop. The driver alone writes
the run directory: `sweep.json` (what was asked) and `sweep.jsonl` (one line per finished configuration, flushed
and fsynced as it comes), so `--resume` runs only the configurations not finished yet, after the driver died too.
Each line says where its trial ran (`trial.environment.placement`): compare configurations measured on one device
model (`by_device`), never across.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from infertune.core.errors import UserError
from infertune.core.paths import append_line, write_json_atomic
from infertune.core.workload import Workload
from infertune.measure import run_trial
from infertune.measure.results import TrialResult
from infertune.measure.zygote import warm_start
from infertune.techniques import Setup
from infertune.techniques.render import config_for
from infertune.tuning.verdict import Objective, objective_value

TrialFn = Callable[..., TrialResult]


class SweepSpec(BaseModel):
    kind: Literal["sweep-spec"] = "sweep-spec"
    models: list[str]  # as the user named them
    model_paths: list[str]
    workload: Workload
    start: Setup  # the knobs the grid does not list
    grid: dict[str, list[Any]] = Field(default_factory=dict, description="knob -> the values to try (Setup fields)")
    objective: Objective = "latency"
    trial_timeout_s: float = 900.0
    trial_memory_limit_bytes: int | None = None


class SweepPoint(BaseModel):
    """One configuration's trial (measured), and where it ran."""

    kind: Literal["sweep-point"] = "sweep-point"
    index: int
    model: str
    changes: dict[str, Any]  # the grid's values for this configuration
    setup: Setup
    objective: float | None  # the objective's measured value; None: the trial failed
    trial: TrialResult


def grid_setups(start: Setup, grid: dict[str, list[Any]]) -> list[tuple[dict[str, Any], Setup]]:
    """Every combination of the grid's values over `start`; an unknown knob or a bad value is one line."""
    known = sorted(Setup.model_fields)
    for knob, values in grid.items():
        if knob not in Setup.model_fields:
            raise UserError(f"--grid {knob}: not a knob (one of {', '.join(known)})")
        if not values:
            raise UserError(f"--grid {knob}: give at least one value ({knob}=A,B)")
    out = []
    for combo in itertools.product(*grid.values()):
        changes = dict(zip(grid, combo, strict=True))
        try:
            setup = Setup.model_validate({**start.model_dump(), **changes})
            config_for(setup)  # what the trial will load: a dtype or attention it does not know is refused here
        except ValidationError as e:
            err = e.errors()[0]
            knob = {"attn_implementation": "attn"}.get(str(err["loc"][0]), str(err["loc"][0]))
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise UserError(f"--grid {knob}={err['input']}: {msg}") from None
        out.append(({k: getattr(setup, k) for k in changes}, setup))
    return out


def points(spec: SweepSpec) -> list[tuple[int, str, str, dict[str, Any], Setup]]:
    """(index, model, model path, changes, setup) of every configuration, models outermost."""
    combos = grid_setups(spec.start, spec.grid)
    models = zip(spec.models, spec.model_paths, strict=True)
    return [(i, m, p, ch, s) for i, ((m, p), (ch, s)) in enumerate(itertools.product(models, combos))]


class SweepRun:
    """A sweep's run directory: sweep.json, sweep.jsonl (written by the driver alone)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.lines = self.path / "sweep.jsonl"
        self.lock = threading.Lock()

    @classmethod
    def create(cls, path: Path, spec: SweepSpec) -> SweepRun:
        path = Path(path)
        if (path / "sweep.json").exists():
            raise UserError(f"{path} already holds a sweep: --resume {path} continues it")
        path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path / "sweep.json", spec.model_dump(mode="json"))
        return cls(path)

    def spec(self) -> SweepSpec:
        try:
            return SweepSpec.model_validate_json((self.path / "sweep.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError(f"{self.path} is not a sweep directory (no sweep.json)") from None
        except ValueError as e:
            raise UserError(f"{self.path}/sweep.json is unreadable: {str(e).splitlines()[0]}") from None

    def done(self) -> list[SweepPoint]:
        """Finished configurations; a line cut short by a kill mid-write is skipped (that one runs again)."""
        if not self.lines.exists():
            return []
        out = []
        for line in self.lines.read_text(encoding="utf-8").splitlines():
            try:
                out.append(SweepPoint.model_validate_json(line))
            except ValueError:
                continue
        return out

    def append(self, point: SweepPoint) -> None:
        """One finished configuration, on a line of its own (after a line a kill cut short too), fsynced."""
        with self.lock:
            append_line(self.lines, point.model_dump_json())


def sweep(
    run: SweepRun, executor: TrialFn | None = None, on_event: Callable[[dict[str, Any]], None] | None = None
) -> list[SweepPoint]:
    """Run every configuration not finished yet, one per lane at a time (a cluster's devices side by side; here:
    one lane), and return all of them in index order. Ctrl-C cancels what runs on the cluster."""
    spec = run.spec()
    emit = on_event or (lambda e: None)
    finished = {p.index for p in run.done()}
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for p in points(spec):
        if p[0] not in finished:
            todo.put(p)
    lanes_of = getattr(executor, "lanes", None)
    lanes: list[dict[str, Any]] = lanes_of() if lanes_of is not None else [{}]
    stop = threading.Event()
    errors: list[BaseException] = []

    def lane(where: dict[str, Any]) -> None:
        while not stop.is_set():
            try:
                index, model, path, changes, setup = todo.get_nowait()
            except queue.Empty:
                return
            emit({"event": "trial", "index": index, "setup": setup, "role": "sweep", "repeat": 1, **where})
            try:
                t = (executor or run_trial)(
                    config_for(setup),
                    spec.workload.model_copy(update={"model": model}),
                    path,
                    timeout_s=spec.trial_timeout_s,
                    memory_limit_bytes=spec.trial_memory_limit_bytes,
                    **where,
                )
            except BaseException as e:  # handed to the main thread, which raises it
                errors.append(e)
                stop.set()
                return
            if stop.is_set():  # cancelled meanwhile: nothing more is written
                return
            point = SweepPoint(
                index=index,
                model=model,
                changes=changes,
                setup=setup,
                objective=objective_value(spec.objective, t) if t.status == "ok" else None,
                trial=t,
            )
            run.append(point)
            emit({"event": "point", "point": point})

    threads = [threading.Thread(target=lane, args=(w,), daemon=True) for w in lanes]
    with warm_start(enabled=executor is None):  # local trials fork from one warm process
        for th in threads:
            th.start()
        try:
            for th in threads:
                while th.is_alive():
                    th.join(0.2)
        except KeyboardInterrupt:
            stop.set()
            cancel = getattr(executor, "cancel", None)
            if cancel is not None:
                cancel()
            raise
    if errors:
        raise errors[0]
    return sorted(run.done(), key=lambda p: p.index)


def by_device(done: list[SweepPoint], objective: Objective) -> dict[str, list[SweepPoint]]:
    """The finished configurations grouped by the device model they ran on ("here" for this machine), each group
    best first on the objective (failed ones last): rank within a group, never across groups."""
    groups: dict[str, list[SweepPoint]] = {}
    for p in done:
        where = (p.trial.environment or {}).get("placement") or {}
        groups.setdefault(where.get("model") or "here", []).append(p)
    sign = -1.0 if objective == "throughput" else 1.0  # throughput: higher is better
    for rows in groups.values():
        rows.sort(key=lambda p: (p.objective is None, sign * (p.objective or 0.0), p.index))
    return groups

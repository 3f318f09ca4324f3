"""sweep: one trial of every configuration of a grid over listed knobs, for one model or several, fanned out over
a Ray cluster (`cluster`) or run here one after another (tuning/sweep.py); durable in a run directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel

from infertune.api.common import OnEvent, Say, default_run_dir, input_lengths, quiet
from infertune.core import validate
from infertune.core.errors import UserError
from infertune.core.paths import check_output
from infertune.core.schema import SCHEMA_VERSION
from infertune.measure.cluster import check_cluster, executor_for
from infertune.tuning.sweep import SweepPoint, SweepRun, SweepSpec, by_device, grid_setups


class SweepOutcome(BaseModel):
    kind: Literal["sweep"] = "sweep"
    schema_version: str = SCHEMA_VERSION
    run_dir: str
    objective: str
    points: list[SweepPoint]  # every finished configuration, in index order (measured)
    ranking: dict[str, list[int]]  # device model -> the indices of its configurations, best first


def parse_grid(grid: list[str] | dict[str, Any] | None) -> dict[str, list[Any]]:
    """`["dtype=float32,bfloat16", "attn=sdpa,eager"]` (the CLI's, repeatable) or a mapping -> knob -> values."""
    if grid is None:
        return {}
    if isinstance(grid, dict):
        return {str(k): list(v) if isinstance(v, list | tuple) else [v] for k, v in grid.items()}
    out: dict[str, list[Any]] = {}
    for item in grid:
        knob, eq, values = item.partition("=")
        if not eq or not knob.strip() or not values.strip():
            raise UserError(f"--grid {item!r}: KNOB=VALUE,VALUE (e.g. dtype=float32,bfloat16)")
        out[knob.strip().replace("-", "_")] = [v.strip() for v in values.split(",") if v.strip()]
    return out


def sweep_spec(
    workload: str | Path | None = None,
    models: list[str] | None = None,
    grid: list[str] | dict[str, Any] | None = None,
    objective: str | None = None,
    max_new_tokens: int | None = None,
    input_len: str | int | list[int] | None = None,
    batch: int | None = None,
    repeats: int | None = None,
    warmup: int | None = None,
    dtype: str | None = None,
    attn: str | None = None,
    trial_timeout: float | None = None,
    trust_remote_code: bool = False,
    say: Say = quiet,
) -> SweepSpec:
    """The validated SweepSpec: refused in one line before any trial (an unknown knob, a bad value, no model)."""
    from infertune.core.config import config_from
    from infertune.core.workload import load_run
    from infertune.estimate.memory import resolve_dtype
    from infertune.models import store
    from infertune.probe.model import profile_model
    from infertune.techniques import Setup

    objective = objective or "latency"
    trial_timeout = 900.0 if trial_timeout is None else trial_timeout
    validate.check(
        max_new_tokens=max_new_tokens, batch=batch, repeats=repeats, warmup=warmup, trial_timeout=trial_timeout
    )
    validate.choice("objective", objective, ("memory", "latency", "throughput"))
    knobs = parse_grid(grid)
    grid_setups(Setup(), knobs)  # an unknown knob or a bad value: refused before any model is read
    wl, cfg_data = load_run(
        workload,
        model=models[0] if models else None,
        max_new_tokens=max_new_tokens,
        **input_lengths(input_len),
        batch=batch,
        repeats=repeats,
        warmup=warmup,
    )
    cfg = config_from(cfg_data, "config", dtype=dtype, attn_implementation=attn)  # the knobs the grid leaves
    names = list(models) if models else [wl.model]
    if len(names) < 2 and all(len(v) < 2 for v in knobs.values()):
        raise UserError("nothing to sweep: give --grid KNOB=A,B (two values or more) or --model twice")
    paths = [str(store.resolve(m, wl.revision, say=say, weights=True, checksums=True)) for m in names]
    native = profile_model(paths[0], trust_remote_code).native_dtype
    start = Setup(dtype=resolve_dtype(cfg.dtype, native) or "float32", attn=cfg.attn_implementation or "sdpa")
    return SweepSpec(
        models=names,
        model_paths=paths,
        workload=wl,
        start=start,
        grid=knobs,
        objective=objective,
        trial_timeout_s=trial_timeout,
    )


def sweep(
    workload: str | Path | None = None,
    *,
    output: str | Path | None = None,
    resume: str | Path | None = None,
    cluster: str | None = None,
    on_event: OnEvent | None = None,
    say: Say = quiet,
    **options: Any,
) -> SweepOutcome:
    """Every configuration of a grid over listed knobs (`grid`: ["dtype=float32,bfloat16", ...]), for each of
    `models`, one trial each, side by side on a Ray cluster's devices (`cluster`: ray or ray=ADDRESS) or one
    after another here; ranked within each device model. `resume` continues a sweep directory."""
    from infertune.tuning.sweep import sweep as run_sweep

    check_output(output, "dir")
    check_output(resume, "run", "resume")
    cluster = check_cluster(cluster, None if resume is not None else workload)
    if resume is not None:
        if workload is not None or output is not None or any(v is not None for v in options.values()):
            raise UserError(f"--resume {resume} continues that sweep as it was specified: give nothing else")
        run = SweepRun(Path(resume))
        spec = run.spec()
    else:
        spec = sweep_spec(workload, say=say, **options)
        run = SweepRun.create(Path(output) if output else default_run_dir("sweep"), spec)
    say(f"run directory: {run.path}")
    (on_event or (lambda e: None))({"event": "run", "path": str(run.path)})
    done = run_sweep(run, executor_for(cluster) if cluster else None, on_event)
    ranking = {model: [p.index for p in rows] for model, rows in by_device(done, spec.objective).items()}
    return SweepOutcome(run_dir=str(run.path), objective=spec.objective, points=done, ranking=ranking)

"""The doctor verb: a user's scripts (never executed) and environment checked, and with `advise` each
script's settings advised on. The advice rows are composed here, above both the doctor and the advisor."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from infertune.advisor.advise import Advice
from infertune.api.advice import advise
from infertune.api.common import Say, quiet
from infertune.core.errors import UserError
from infertune.doctor import DoctorResult as Findings
from infertune.doctor.result import Finding
from infertune.models.hub import revision_of

if TYPE_CHECKING:
    from infertune.doctor.nodes import Finding as Found


class ScriptAdvice(BaseModel):
    path: str
    command: str | None = None  # the equivalent `infertune advise` command line
    advice: Advice | None = None  # estimates, when the script's model is available here
    error: str | None = None


class DoctorResult(Findings):
    advice: list[ScriptAdvice] | None = Field(None, description="with --advise: each script's settings advised on")


# --- doctor -----------------------------------------------------------------------------------------------


def doctor(
    paths: Sequence[str | Path] | str | Path | None = None,
    env: bool = False,
    advise: bool = False,
    gpu: str | None = None,
    model: str | None = None,
    say: Say = quiet,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    target_version: str | None = None,
) -> DoctorResult:
    """The classic inference mistakes in scripts (never executed), optionally the environment's, and each
    script's settings as an advise run: a `DoctorResult`. `select`/`ignore` choose rules like ruff's;
    `target_version` is the transformers version the scripts run on (default: their pins)."""
    from infertune import doctor as doc
    from infertune.doctor.nodes import Target

    files = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths or []]
    if not files and not env:
        raise UserError("give Python files or folders to check (infertune doctor app.py), or --env")
    target = Target()
    if gpu:
        from infertune.estimate.accelerators import find_accelerator

        acc = find_accelerator(gpu)
        target.gpu_name, target.gpu_memory_bytes = acc.name, acc.memory_bytes
        target.compute_capability = float(acc.compute_capability) if acc.compute_capability else None
    scripts, missing = doc.python_files(files)
    if files and not scripts and not missing:
        raise UserError(f"{' '.join(str(p) for p in files)}: no Python files to check (doctor reads *.py files)")
    try:
        report = doc.check(files, target, select, ignore, target_version)
    except ValueError as e:  # an unknown rule, a --target-version that is not a version
        raise UserError(str(e)) from None
    result = DoctorResult(findings=report.findings, files=report.files, errors=report.errors)
    if env:
        found, result.model_revision = _environment_findings(model, say)
        result.findings += [Finding.model_validate(f) for f in found]
    if advise:
        result.advice = _advise_scripts(files, gpu)
    return result


def _environment_findings(model: str | None, say: Say) -> tuple[list[Found], str | None]:
    from infertune.doctor.env import check_environment
    from infertune.probe.hardware import detect_hardware

    prof = folder = None
    if model:  # resolved first: a model that is not here is refused before anything is read
        from infertune.models import store
        from infertune.probe.model import profile_model

        folder = store.resolve(model, None, say=say)
        prof = profile_model(folder)
    say("reading the environment")
    hw = detect_hardware()
    weights = None
    if prof is not None:
        from infertune.estimate.memory import EstimateSettings, estimate_memory, resolve_dtype

        dtype = resolve_dtype("auto", prof.native_dtype) or "float32"
        weights = estimate_memory(
            prof, EstimateSettings(dtype=dtype, platform="cuda" if hw.gpus else "cpu")
        ).weights_bytes
    return check_environment(hw, model_bytes=weights, model=model), revision_of(folder) if folder else None


def _advise_scripts(paths: list[Path], gpu: str | None) -> list[ScriptAdvice]:
    """Each script's literal settings (model, dtype, attention, quantization, cache, max_new_tokens) as an
    advise run, or why there is none (no model literal, the model is not available here)."""
    import shlex

    from infertune import doctor as doc

    out: list[ScriptAdvice] = []
    for f in doc.python_files(paths)[0]:
        try:
            found: dict[str, Any] = doc.settings(doc.parse(f))  # literals keyed by advise's parameter names
        except ValueError:
            continue
        if "model" not in found:
            out.append(ScriptAdvice(path=str(f), error="no from_pretrained('<model>') literal to advise on"))
            continue
        if gpu:
            found["gpu"] = gpu
        flags = [
            f"--{k.replace('_', '-')}" + ("" if v is True else f" {shlex.quote(str(v))}") for k, v in found.items()
        ]
        row = ScriptAdvice(path=str(f), command=f"infertune advise --no-input {' '.join(flags)}")
        try:
            row.advice = advise(**found)
        except UserError as e:
            row.error = f"cannot advise: {e}"
        out.append(row)
    return out

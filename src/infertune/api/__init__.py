"""infertune's verbs as Python functions: the CLI, the MCP server and user code all call these.

Arguments are the CLI's long flags in snake_case (token counts also as text: "1k"); each function returns
the pydantic model whose JSON is what `--format json` prints. Bad input raises `UserError` with one line.
Long verbs take `on_event`, called with progress dicts (`{"event": "phase" | "progress" | "trial" | ...}`).
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from infertune.api.advice import advise
    from infertune.api.checkup import DoctorResult, ScriptAdvice, doctor
    from infertune.api.common import (
        OnEvent,
        Say,
        default_run_dir,
        input_lengths,
        parse_budgets,
        parse_size_flag,
        parse_tokens,
    )
    from infertune.api.plan import EnvReport, EstimateSweep, env, estimate
    from infertune.api.runs import (
        TuneOutcome,
        check_device,
        host_facts,
        measure,
        report,
        resume_only,
        run_tune,
        tune,
        tune_spec,
    )
    from infertune.api.serving import engines, install_engine, loadtest, serve_trial
    from infertune.api.sweeps import SweepOutcome, sweep

# Each name is imported from its module on first use, so a verb loads only what it needs: `estimate` on a
# model seen before stays clear of the trial runner, the tuner and their libraries (start-up, see
# benchmarks/estimate_startup.py).
_HOME = {
    "advice": ("advise",),
    "checkup": ("DoctorResult", "ScriptAdvice", "doctor"),
    "common": (
        "OnEvent",
        "Say",
        "default_run_dir",
        "input_lengths",
        "parse_budgets",
        "parse_size_flag",
        "parse_tokens",
    ),
    "plan": ("EnvReport", "EstimateSweep", "env", "estimate"),
    "runs": (
        "TuneOutcome",
        "check_device",
        "host_facts",
        "measure",
        "report",
        "resume_only",
        "run_tune",
        "tune",
        "tune_spec",
    ),
    "serving": ("engines", "install_engine", "loadtest", "serve_trial"),
    "sweeps": ("SweepOutcome", "sweep"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'infertune.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"infertune.api.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DoctorResult",
    "EnvReport",
    "EstimateSweep",
    "OnEvent",
    "Say",
    "ScriptAdvice",
    "SweepOutcome",
    "TuneOutcome",
    "advise",
    "check_device",
    "default_run_dir",
    "doctor",
    "engines",
    "env",
    "estimate",
    "host_facts",
    "input_lengths",
    "install_engine",
    "loadtest",
    "measure",
    "parse_budgets",
    "parse_size_flag",
    "parse_tokens",
    "report",
    "resume_only",
    "run_tune",
    "serve_trial",
    "sweep",
    "tune",
    "tune_spec",
]

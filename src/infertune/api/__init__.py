"""infertune's verbs as Python functions: the CLI, the MCP server and user code all call these.

Arguments are the CLI's long flags in snake_case (token counts also as text: "1k"); each function returns
the pydantic model whose JSON is what `--format json` prints. Bad input raises `UserError` with one line.
Long verbs take `on_event`, called with progress dicts (`{"event": "phase" | "progress" | "trial" | ...}`).
"""

from infertune.api.checkup import DoctorResult, ScriptAdvice, doctor
from infertune.api.common import (OnEvent, Say, default_run_dir, input_lengths, parse_budgets, parse_size_flag,
                                  parse_tokens)
from infertune.api.plan import EnvReport, EstimateSweep, advise, env, estimate
from infertune.api.runs import (TuneOutcome, check_device, host_facts, measure, report, resume_only, run_tune, tune,
                                tune_spec)

__all__ = ["DoctorResult", "EnvReport", "EstimateSweep", "OnEvent", "Say", "ScriptAdvice", "TuneOutcome", "advise",
           "default_run_dir", "doctor", "env", "estimate", "host_facts", "input_lengths", "measure",
           "parse_budgets", "parse_size_flag", "parse_tokens", "report", "resume_only", "check_device", "run_tune", "tune",
           "tune_spec"]

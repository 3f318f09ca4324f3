"""Measured trials: one (InferenceConfig, Workload) run in an isolated child process."""

from typing import TYPE_CHECKING

from infertune.measure.results import RequestOutput, TrialMetrics, TrialResult

if TYPE_CHECKING:
    from infertune.measure.trial import run_trial


def __getattr__(name: str):
    # the trial runner (process supervision, psutil) is imported on first use: `advise` reads the result types only
    if name == "run_trial":
        from infertune.measure.trial import run_trial

        return run_trial
    raise AttributeError(f"module 'infertune.measure' has no attribute {name!r}")


__all__ = ["RequestOutput", "TrialMetrics", "TrialResult", "run_trial"]

"""Measured trials: one (InferenceConfig, Workload) run in an isolated child process."""

from infertune.measure.results import RequestOutput, TrialMetrics, TrialResult
from infertune.measure.trial import run_trial

__all__ = ["RequestOutput", "TrialMetrics", "TrialResult", "run_trial"]

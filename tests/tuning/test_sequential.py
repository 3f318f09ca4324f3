"""Sequential stopping on a fake-timing backend: a clear loser stops after one pair, a close call spends the
budget, and the noise floor is the baseline's pilot."""

from types import SimpleNamespace

import numpy as np

from infertune.techniques import Setup
from infertune.tuning.loop import LOSER_MIN, _step, loser_threshold
from infertune.tuning.run import Run, Step
from tests.tuning.test_tune import _spec, _timed

BASE = Setup(dtype="bfloat16", attn="sdpa")


def _backend(candidate_s: float, noise: float, seed: int = 0):
    """Trials whose e2e is the incumbent's 1.0 s or the candidate's, each times 1 ± `noise` (uniform)."""
    rng = np.random.default_rng(seed)
    calls = []

    def trial(index, setup, role="candidate", repeat=1, scored=True):
        calls.append((role, repeat))
        seconds = candidate_s if setup != BASE else 1.0
        return _timed(seconds * (1 + rng.uniform(-noise, noise)))

    return trial, calls


def _run_step(tmp_path, candidate_s: float, noise: float, floor: float | None = 0.01):
    spec = _spec("m", objective="latency", min_pairs=3, max_pairs=5)
    run = Run.create(tmp_path / "r", spec)
    baseline = Step(
        index=0, technique=None, changes={}, setup=BASE, expected=None, trial=_timed(1.0), quality=None,
        objective=1.0, accepted=True, reason="baseline", noise_floor=floor,
    )  # fmt: skip
    flex = BASE.model_copy(update={"attn": "flex_attention"})
    move = SimpleNamespace(technique="attn-flex", settings={"attn": "flex_attention"}, setup=flex, expected=None)
    trial, calls = _backend(candidate_s, noise)
    return _step(spec, 1, move, baseline, baseline, run, trial, floor=floor), calls


def test_a_clear_loser_stops_after_one_pair(tmp_path):
    step, calls = _run_step(tmp_path, candidate_s=1.53, noise=0.02)  # flex attention on this CPU: 53 % slower
    assert len(calls) == 2 and len(step.pairs) == 1
    assert step.verdict == "rejected" and not step.accepted and step.delta > LOSER_MIN
    assert "clear loser" in step.reason and "after 1 pair" in (step.stopped or "")


def test_a_close_call_spends_the_pair_budget(tmp_path):
    step, calls = _run_step(tmp_path, candidate_s=1.01, noise=0.05)  # 1 % apart on a 5 % noise
    assert len(step.pairs) == 5 and len(calls) == 10
    assert step.verdict == "inconclusive" and "budget" in (step.stopped or "")


def test_a_clear_gain_still_needs_min_pairs(tmp_path):
    """Early stopping is only for losers: a gain is kept on the unchanged rule, after min_pairs."""
    step, _ = _run_step(tmp_path, candidate_s=0.5, noise=0.02)
    assert len(step.pairs) == 3 and step.verdict == "kept" and "clear" in (step.stopped or "")


def test_without_a_pilot_or_on_a_noisy_machine_one_pair_decides_nothing(tmp_path):
    step, _ = _run_step(tmp_path, candidate_s=1.53, noise=0.02, floor=None)
    assert len(step.pairs) == 3 and step.verdict == "rejected"
    assert loser_threshold(0.25) == 0.75  # a noisy pilot raises the bar: 3x its floor
    step, _ = _run_step(tmp_path / "b", candidate_s=1.53, noise=0.02, floor=0.25)
    assert len(step.pairs) == 3

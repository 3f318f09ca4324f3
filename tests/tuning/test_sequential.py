"""Sequential stopping on a fake-timing backend: a clear loser stops after one pair, a clear winner after two, a
close call that can still turn spends the budget, one that cannot stops; the end-of-run confirmation; the noise
floor is the baseline's pilot and is measured again when the machine's load changes."""

from types import SimpleNamespace

import numpy as np

from infertune.measure.machine import MachineLoad
from infertune.techniques import Setup
from infertune.tuning.confirm import confirm
from infertune.tuning.loop import _step
from infertune.tuning.run import Run, Step, best_step
from infertune.tuning.sequential import CLEAR_MIN, TIE_WINNER, clear_threshold, futile, stop_after, tie_winner
from infertune.tuning.verdict import Pair, decide
from tests.tuning.test_tune import _pairs, _spec, _timed

BASE = Setup(dtype="bfloat16", attn="sdpa")
FLEX = BASE.model_copy(update={"attn": "flex_attention"})


def _backend(candidate_s, noise: float = 0.0, seed: int = 0):
    """Trials whose e2e is the incumbent's 1.0 s or the candidate's (a number, or one value per candidate trial
    in order), each times 1 ± `noise` (uniform)."""
    rng = np.random.default_rng(seed)
    calls = []
    script = iter(candidate_s) if isinstance(candidate_s, list) else None

    def trial(index, setup, role="candidate", repeat=1, scored=True):
        calls.append((role, repeat))
        seconds = 1.0 if setup == BASE else (next(script) if script else candidate_s)
        return _timed(seconds * (1 + rng.uniform(-noise, noise)))

    return trial, calls


def _baseline(floor):
    return Step(
        index=0, technique=None, changes={}, setup=BASE, expected=None, trial=_timed(1.0), quality=None,
        objective=1.0, accepted=True, reason="baseline", noise_floor=floor,
    )  # fmt: skip


def _run_step(tmp_path, candidate_s, noise: float = 0.0, floor: float | None = 0.01):
    spec = _spec("m", objective="latency", min_pairs=3, max_pairs=5)
    run = Run.create(tmp_path / "r", spec)
    baseline = _baseline(floor)
    move = SimpleNamespace(technique="attn-flex", settings={"attn": "flex_attention"}, setup=FLEX, expected=None)
    trial, calls = _backend(candidate_s, noise)
    return _step(spec, 1, move, baseline, baseline, run, trial, floor=floor), calls


def test_a_clear_loser_stops_after_one_pair(tmp_path):
    step, calls = _run_step(tmp_path, candidate_s=1.53, noise=0.02)  # flex attention on this CPU: 53 % slower
    assert len(calls) == 2 and len(step.pairs) == 1
    assert step.verdict == "rejected" and not step.accepted and step.delta > CLEAR_MIN
    assert "clear loser" in step.reason and "after 1 pair" in (step.stopped or "")


def test_a_loser_that_saves_memory_gets_a_pair_in_each_order_before_it_is_rejected():
    """bf16 on a CPU: one pair 21.5 % slower (a burst?) at half the memory is not rejected on that pair alone."""
    mib = 2.0**20
    one = _pairs([1.0], [1.215], inc_mem=903 * mib, cand_mem=475 * mib)
    assert stop_after("latency", one, 3, 5, 0.2) is None
    two = _pairs([1.0, 1.0], [1.215, 1.3], inc_mem=903 * mib, cand_mem=475 * mib)
    assert "clear loser" in (stop_after("latency", two, 3, 5, 0.2) or "")
    assert "clear loser" in (stop_after("latency", _pairs([1.0], [1.215]), 3, 5, 0.2) or "")  # nothing to offer


def test_a_clear_winner_is_kept_after_two_pairs_one_in_each_order(tmp_path):
    step, calls = _run_step(tmp_path, candidate_s=0.5, noise=0.02)
    assert len(step.pairs) == 2 and [c[0] for c in calls] == ["candidate", "incumbent", "incumbent", "candidate"]
    assert step.verdict == "kept" and step.accepted and "clear winner" in (step.stopped or "")


def test_a_close_call_that_can_still_turn_spends_the_pair_budget(tmp_path):
    """Every pair gains, 1-10 %, too unevenly to be clear: a further pair could still make it clear."""
    step, calls = _run_step(tmp_path, candidate_s=[0.98, 0.90, 0.99, 0.97, 0.91])
    assert len(step.pairs) == 5 and len(calls) == 10
    assert step.verdict == "inconclusive" and "budget" in (step.stopped or "")


def test_a_close_call_that_cannot_turn_stops_where_the_budget_would_end_inconclusive(tmp_path):
    """One pair gains, the next loses: the band covers "no change" whatever comes next (up to 7 pairs)."""
    step, calls = _run_step(tmp_path, candidate_s=[0.97, 1.04, 0.95, 1.02, 0.99])
    assert len(step.pairs) == 2 and len(calls) == 4
    assert step.verdict == "inconclusive" and "cannot change" in (step.stopped or "")
    assert decide("latency", step.pairs).verdict == "inconclusive"


def test_a_clear_gain_on_the_tie_stops_after_two_pairs_and_only_where_the_objective_cannot_be_rejected():
    """sdpa on this CPU: latency within the noise, 15 % less memory in every pair: adopted on the tie in two
    pairs. Not when every pair so far loses on the objective (a rejection is still possible), nor when the
    tie axis's gains are too uneven to be settled, nor on a gain under TIE_GAIN."""
    mib = 2.0**20
    tie = _pairs([1.0, 1.0], [0.97, 1.04], inc_mem=477 * mib, cand_mem=406 * mib)
    why = stop_after("latency", tie, 3, 5, 0.2)
    assert why is not None and TIE_WINNER in why and "after 2 pairs" in why
    assert decide("latency", tie).accepted and decide("latency", tie).verdict == "inconclusive"
    assert stop_after("latency", tie[:1], 3, 5, 0.2) is None  # one pair: one order only
    losing = _pairs([1.0, 1.0], [1.03, 1.04], inc_mem=477 * mib, cand_mem=406 * mib)
    assert not tie_winner("latency", losing, 5) and stop_after("latency", losing, 3, 5, 0.2) is None
    uneven = [
        Pair(incumbent=1.0, candidate=0.97, incumbent_tie=100.0, candidate_tie=85.0),
        Pair(incumbent=1.0, candidate=1.04, incumbent_tie=100.0, candidate_tie=60.0),
    ]
    assert not tie_winner("latency", uneven, 5)  # gains 15 % and 40 %: 10 % + 3 x 25 % is out of reach
    small = _pairs([1.0, 1.0], [0.97, 1.04], inc_mem=477 * mib, cand_mem=440 * mib)  # 7.8 % less: no tie win
    assert not tie_winner("latency", small, 5)
    busy = [p.model_copy(update={"busy": True}) for p in tie]
    assert stop_after("latency", busy, 3, 5, 0.2) is None


def test_a_tie_winner_is_never_rejected_or_dropped_by_the_rest_of_the_budget():
    """Against the verdict rule: whenever `tie_winner` stops at 2 pairs, completions of the budget whose tie
    gains stay within the settled spread are still adopted (the objective can no longer be rejected)."""
    rng = np.random.default_rng(2)
    stopped = 0
    for _ in range(300):
        lat = rng.choice([0.9, 0.97, 1.0, 1.03, 1.1], size=2)
        mem = rng.uniform(0.5, 0.95, size=2)
        pairs = [Pair(incumbent=1.0, candidate=float(a), incumbent_tie=1.0, candidate_tie=float(m))
                 for a, m in zip(lat, mem, strict=True)]  # fmt: skip
        if not tie_winner("latency", pairs, 5):
            continue
        stopped += 1
        for _ in range(10):
            k = int(rng.integers(1, 4))
            more = [Pair(incumbent=1.0, candidate=float(a), incumbent_tie=1.0, candidate_tie=float(m))
                    for a, m in zip(rng.uniform(0.5, 2.0, size=k), rng.uniform(mem.min(), mem.max(), size=k),
                                    strict=True)]  # fmt: skip
            assert decide("latency", pairs + more).accepted
    assert stopped > 20  # the rule fired often enough to be tested


def test_futility_is_exact_it_never_stops_what_the_budget_could_still_decide():
    """Against the verdict rule itself: for every order of signs over 5 pairs, whenever `futile` stops at n
    pairs, no completion of the budget (a grid of ratios) reaches a verdict other than inconclusive."""
    grid = [0.5, 0.9, 0.97, 1.0, 1.03, 1.1, 2.0]
    rng = np.random.default_rng(1)
    for _ in range(300):
        ratios = list(rng.choice(grid, size=2))
        pairs = [Pair(incumbent=1.0, candidate=float(r), incumbent_tie=1.0, candidate_tie=1.0) for r in ratios]
        if not futile(pairs, 5):
            continue
        for _ in range(20):
            more = [Pair(incumbent=1.0, candidate=float(r), incumbent_tie=1.0, candidate_tie=1.0)
                    for r in rng.choice(grid, size=int(rng.integers(1, 4)))]  # fmt: skip
            d = decide("latency", pairs + more)
            assert d.verdict == "inconclusive" and not d.accepted
    # a tie axis that still agrees on a direction keeps the step going: it could be kept on the tie
    leaning = _pairs([1.0, 1.0], [0.97, 1.04], inc_mem=900.0, cand_mem=600.0)
    assert not futile(leaning, 5)


def test_without_a_pilot_or_on_a_busy_machine_one_pair_decides_nothing(tmp_path):
    step, _ = _run_step(tmp_path, candidate_s=1.53, noise=0.02, floor=None)
    assert len(step.pairs) == 3 and step.verdict == "rejected"
    assert clear_threshold(0.25) == 0.75  # a noisy pilot raises the bar: 3x its floor
    step, _ = _run_step(tmp_path / "b", candidate_s=1.53, noise=0.02, floor=0.25)
    assert len(step.pairs) == 3
    busy = [p.model_copy(update={"busy": True}) for p in _pairs([1.0], [2.0])]
    assert stop_after("latency", busy, 3, 5, 0.2) is None


def _chain(tmp_path, pick_s, floor=0.01):
    """A finished run: baseline (1.0 s) and one kept step (sdpa on eager at `pick_s`)."""
    spec = _spec("m", objective="latency", min_pairs=3, max_pairs=5)
    kept = Step(
        index=1, technique="attn-flex", changes={}, setup=FLEX, expected=None, trial=_timed(0.5), quality=None,
        objective=0.5, accepted=True, reason="kept", verdict="kept",
    )  # fmt: skip
    return spec, [_baseline(floor), kept], _backend(pick_s)


def test_the_end_of_run_confirmation_measures_the_pick_against_the_baseline_fresh(tmp_path):
    spec, steps, (trial, calls) = _chain(tmp_path, pick_s=0.6)
    c = confirm(spec, steps, trial, 0.01)
    assert c is not None and c.outcome == "confirmed" and c.winner == 1
    assert calls[0] == ("confirm incumbent", 1)  # the order reversed: the baseline first
    assert len(c.pairs) == 2 and abs(c.delta + 0.4) < 1e-9  # a clear winner: two pairs
    spec, steps, (trial, _) = _chain(tmp_path, pick_s=[0.99, 1.02, 0.98, 1.01, 1.0])
    assert confirm(spec, steps, trial, 0.01).outcome == "not confirmed"
    assert confirm(spec, [steps[0]], trial, 0.01) is None  # the pick is the baseline: nothing to confirm


def test_a_reversed_confirmation_undoes_the_changes_and_a_resume_reads_it(tmp_path):
    from infertune.tuning.confirm import undone

    spec, steps, (trial, _) = _chain(tmp_path, pick_s=1.6)
    c = confirm(spec, steps, trial, 0.01)
    assert c is not None and c.outcome == "reversed" and len(c.pairs) == 2  # a reversal rests on both orders
    # one pair slowed by a burst of other work (+42 %) does not undo the run: the next pair decides
    spec_o, steps_o, (outlier, _) = _chain(tmp_path / "o", pick_s=[1.42, 0.6, 0.6, 0.6, 0.6])
    assert confirm(spec_o, steps_o, outlier, 0.01).outcome != "reversed"
    run = Run.create(tmp_path / "r", spec)
    for s in (*steps, *undone(steps, c)):
        run.append(s)
    run.save_confirmation(c)
    assert best_step(run.steps()).index == 0 and "undone at the end" in run.steps()[1].reason
    assert run.confirmation() == c


def test_the_floor_is_measured_again_when_the_machine_gets_busy(tmp_path, monkeypatch):
    """The baseline's pilot ran on a quiet machine; the step after a busy one pilots the incumbent again."""
    import infertune.tuning.loop as loop
    from infertune.techniques import Facts  # noqa: F401  (the loop's own types)

    spec = _spec("m", objective="latency", min_pairs=3, max_pairs=5, max_trials=3)
    run = Run.create(tmp_path / "r", spec)
    busy = MachineLoad(cores=2, seconds=1.0, load_average=6.0, others_cpu=1.5, busy=True, reasons=["load"])
    quiet_base = _baseline(0.01).model_copy(update={"setup": spec.start})
    noisy = Step(
        index=1, technique="dtype", changes={}, setup=spec.start, expected=None, trial=_timed(1.0), quality=None,
        objective=1.0, accepted=False, reason="inconclusive", verdict="inconclusive", machine=busy,
    )  # fmt: skip
    for s in (quiet_base, noisy):
        run.append(s)
    move = SimpleNamespace(technique="attn-flex", settings={"attn": "flex_attention"}, setup=FLEX, expected=None)
    monkeypatch.setattr(loop, "candidates", lambda f, best, tried: [] if "attn-flex" in tried else [move])
    facts = SimpleNamespace(accelerator=SimpleNamespace(bf16=False))
    trials = []

    def executor(config, workload, model_path, **kw):
        trials.append(config)
        return _timed(0.5 if config.attn_implementation == "flex_attention" else 1.0)

    steps = loop.tune(run, facts, executor=executor)
    assert steps[2].noise_floor is not None and steps[2].technique == "attn-flex"
    assert len(trials) >= 2 + 4  # the pilot's two trials of the incumbent, then the pairs

"""One object from advice into the trial: the tuner measures the advisor's candidates as they were built."""

import json

import pytest

from infertune.advisor.advise import advise, moves_to_try, no_expected_change
from infertune.api import host_facts
from infertune.core.workload import Workload
from infertune.measure.results import RequestOutput, TrialMetrics, TrialResult
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.techniques import render as rendering
from infertune.tuning import loop
from infertune.tuning.run import Run, TuneSpec
from tests.advisor.test_advise import LLAMA3_8B, facts


def _fake_trial(config, workload, model_path, **kw) -> TrialResult:
    """A finished trial whose latency and memory depend on the configuration (no model is run)."""
    seconds = {"float32": 1.0, "bfloat16": 0.6, "float16": 0.7}.get(str(config.dtype), 1.0)
    peak = {"float32": 900, "bfloat16": 450, "float16": 450}.get(str(config.dtype), 900) * 2**20
    m = TrialMetrics(
        memory_kind="cpu_rss",
        load_s=1,
        baseline_memory_bytes=1,
        peak_memory_bytes=peak,
        peak_memory_load_bytes=peak,
        peak_memory_generate_bytes=peak,
        cpu_peak_rss_bytes=peak,
        weights_bytes=1,
        ttft_s=0.1,
        ttft_p50_s=0.1,
        ttft_p95_s=0.1,
        tpot_s=seconds / 100,
        tpot_p50_s=seconds / 100,
        tpot_p95_s=seconds / 100,
        e2e_s=seconds,
        e2e_p50_s=seconds,
        e2e_p95_s=seconds,
        tokens_per_s=100 / seconds,
        output_tokens=4,
        input_tokens_mean=3,
        requests=1,
        generate_calls=1,
    )
    out = [RequestOutput(prompt_index=0, input_tokens=3, output_token_ids=[1, 2, 3, 4], text="same", finish="length")]
    return TrialResult(
        status="ok",
        config=config,
        workload=workload,
        model_path=str(model_path),
        metrics=m,
        outputs=out,
        duration_s=0.01,
    )


@pytest.fixture()
def tuned(tiny_model, tmp_path, monkeypatch):
    """A tune of three steps on fake trials, with every estimate the run made recorded by who asked for it."""
    wl = Workload(model=str(tiny_model), prompts=["Once upon a time"], max_new_tokens=4, warmup=0)
    spec = TuneSpec(
        model=str(tiny_model),
        model_path=str(tiny_model),
        workload=wl,
        start=Setup(dtype="float32", attn="eager"),
        objective="latency",
        max_trials=3,
        min_pairs=2,
        max_pairs=2,
        confirm=False,
    )
    run = Run.create(tmp_path / "run", spec)
    facts = host_facts(spec, profile_model(tiny_model))
    callers: list[str] = []
    real = rendering.estimate_setup

    def estimate_setup(*args, **kw):
        import sys

        callers.append(sys._getframe(1).f_globals["__name__"])
        return real(*args, **kw)

    # every module that estimates a setup reads it from techniques.render by name: replace it there and in each
    for module in ("infertune.techniques.render", "infertune.advisor.moves", "infertune.advisor.advise"):
        monkeypatch.setattr(f"{module}.estimate_setup", estimate_setup)
    monkeypatch.setattr(loop, "estimate_setup", estimate_setup, raising=False)
    monkeypatch.setattr(loop, "run_trial", _fake_trial)
    steps = loop.tune(run, facts)
    return facts, spec, steps, callers


def test_each_step_carries_the_advisors_expected_effect_exactly_as_built(tuned):
    facts, spec, steps, _ = tuned
    assert len(steps) == 3 and steps[0].technique is None
    incumbent = spec.start
    for step in steps[1:]:
        built = [c for c in moves_to_try(facts, incumbent) if c.technique == step.technique]
        move = built[0]  # the first of its technique: the one the tuner takes
        assert step.expected == move.expected  # factors included, not recomputed another way
        assert step.setup == move.setup and step.changes == move.settings
        if step.accepted:
            incumbent = step.setup


def test_the_tuner_estimates_nothing_itself(tuned):
    """The walk of the facts through the loop enters the estimator only through the advisor."""
    *_, callers = tuned
    assert callers and not [c for c in callers if c.startswith("infertune.tuning")]


@pytest.fixture(scope="module")
def llama8b(tmp_path_factory):
    d = tmp_path_factory.mktemp("llama3-8b")
    (d / "config.json").write_text(json.dumps(LLAMA3_8B))
    return profile_model(d)


@pytest.mark.parametrize("gpu,concurrency", [("T4", 1), ("A100 80GB", 16)])
def test_the_advisors_recommendations_are_its_candidates_rendered(llama8b, gpu, concurrency):
    """A recommendation is the candidate as built, with the user's words added: same setup, same estimate."""
    f = facts(llama8b, gpu, input_len=4096, concurrency=concurrency)
    current = Setup(dtype="float32", attn="eager")
    advice = advise(f, current)
    built = moves_to_try(f, current)
    assert advice.recommendations
    for r in advice.recommendations:
        same = [c for c in built if c.setup == r.setup]
        assert len(same) == 1 and same[0].expected == r.expected and same[0].quality_risk == r.quality_risk
    # the ranked ones lead the tuner's list, in the advisor's order
    assert [c.setup for c in built[: len(advice.recommendations)]] == [r.setup for r in advice.recommendations]


def test_the_baseline_is_piloted_once_for_the_runs_noise_floor(tuned):
    """The baseline runs twice; the spread of the two (0 on this fake backend) is kept with the baseline step,
    and every step says how many pairs it ran and why it stopped."""
    _, _, steps, _ = tuned
    assert steps[0].noise_floor == 0.0
    assert all(s.stopped and f"{len(s.pairs)} pair" in s.stopped for s in steps[1:] if s.pairs)


def test_a_move_whose_estimate_sees_no_difference_is_not_measured(tuned):
    """After sdpa, FlexAttention is compatible but the estimate sees nothing it would change (same kernel tier, no
    priced factor): the tuner spends no trial on it; a move it does see a difference for stays a candidate."""
    facts, *_ = tuned
    at = Setup(dtype="bfloat16", attn="sdpa")
    every = {c.technique: c for c in moves_to_try(facts, at)}
    assert "attn-flex" in every and no_expected_change(every["attn-flex"])
    tried = {c.technique for c in loop.candidates(facts, at, set())}
    assert "attn-flex" not in tried
    seen = [t for t, c in every.items() if not no_expected_change(c)]
    assert seen and all(
        t in tried or every[t].compatibility.issues or not loop.measurable(every[t].setup) for t in seen
    )
    # a difference the estimate does see (eager -> sdpa: time and memory) keeps sdpa a candidate from eager
    assert "attn-sdpa" in {c.technique for c in loop.candidates(facts, Setup(dtype="bfloat16", attn="eager"), set())}


def test_a_move_the_estimate_cannot_tell_from_one_measured_and_not_adopted_is_not_measured(tuned):
    """From eager, sdpa and FlexAttention are one to the estimate: once sdpa was measured from this incumbent and not
    adopted, flex is not a step of its own; adopted, or from another incumbent, it would be."""
    facts, spec, steps, _ = tuned
    base = steps[0]
    moves = {c.technique: c for c in reversed(moves_to_try(facts, base.setup))}
    sdpa, flex = moves["attn-sdpa"], moves["attn-flex"]
    measured = steps[1].model_copy(
        update={"index": 1, "technique": "attn-sdpa", "expected": sdpa.expected, "setup": sdpa.setup, "accepted": False}
    )
    assert loop.twin_of(flex, [base, measured], base) is measured
    assert loop.twin_of(moves["dtype"], [base, measured], base) is None  # another family, another estimate
    adopted = measured.model_copy(update={"accepted": True})
    assert loop.twin_of(flex, [base, adopted], adopted) is None  # measured from the adopted sdpa: a new incumbent
    assert loop.twin_of(flex, [base, measured], measured.model_copy(update={"index": 1})) is None

"""The tuning loop on a tiny model: one change per step, quality-gated, durable, resumable, reported."""

import json
import shutil

import numpy as np
import pytest

from infertune import report
from infertune.api import host_facts as _host_facts
from infertune.core.workload import Workload
from infertune.measure.quality import Tolerance, compare
from infertune.measure.results import RequestOutput, TrialMetrics, TrialResult
from infertune.probe.model import profile_model
from infertune.techniques import Setup
from infertune.tuning.loop import tune
from infertune.tuning.run import Run, TuneSpec
from infertune.tuning.serve_stage import serve_stage, serve_variants
from infertune.tuning.verdict import Pair, decide


def _spec(model, **kw) -> TuneSpec:
    wl = Workload(model=str(model), prompts=["Once upon a time", "The sea is"], max_new_tokens=6, warmup=0)
    base = dict(
        model=str(model),
        model_path=str(model),
        workload=wl,
        start=Setup(dtype="float32", attn="eager"),
        objective="memory",
        max_trials=3,
        trial_timeout_s=300,
        min_pairs=2,
        max_pairs=2,
    )
    base.update(kw)
    return TuneSpec(**base)


@pytest.fixture(scope="module")
def finished(tiny_model, tmp_path_factory):
    """One real tune run (3 trials) shared by the tests below."""
    run = Run.create(tmp_path_factory.mktemp("run") / "r", _spec(tiny_model))
    facts = _host_facts(run.spec(), profile_model(tiny_model))
    events = []
    steps = tune(run, facts, events.append)
    return run, facts, steps, events


def test_baseline_then_one_change_per_step(finished):
    run, facts, steps, events = finished
    assert [s.index for s in steps] == [0, 1, 2] and steps[0].technique is None and steps[0].accepted
    assert steps[0].verdict is None and steps[0].delta is None  # the baseline: nothing to compare it with
    trials = [e for e in events if e["event"] == "trial"]
    assert trials[0]["role"] == "baseline"
    for s in steps[1:]:
        assert s.technique and s.changes
        assert s.expected is not None and s.expected.kind == "estimate"  # chosen on an estimate
        assert s.trial.kind == "measured" and s.quality is not None and s.quality.kind == "measured"
        # interleaved: candidate first in pair 1, then the incumbent; incumbent first in pair 2 (after the two
        # pilot trials of a re-measured noise floor, when the machine's load changed since the last one)
        roles = [(e["role"], e["repeat"]) for e in trials if e["index"] == s.index]
        pilots = [r for r in roles if r[0] == "pilot"]
        assert pilots in ([], [("pilot", 1), ("pilot", 2)]) and roles[: len(pilots)] == pilots
        roles = roles[len(pilots) :]
        assert roles == [("candidate", 1), ("incumbent", 1), ("incumbent", 2), ("candidate", 2)][: len(roles)]
        assert len(roles) == 2 * len(s.pairs) and s.machine is not None
    dtype_step = next(s for s in steps if s.technique == "dtype")
    assert dtype_step.changes == {"dtype": "bfloat16"}
    # the verdict is the decision rule applied to the pairs it measured, never above its own noise
    clear_loser = "clear loser" in (dtype_step.stopped or "")  # rejected on one pair, beyond 3x the noise floor
    if clear_loser:
        assert len(dtype_step.pairs) == 1 and dtype_step.verdict == "rejected" and not dtype_step.accepted
    elif dtype_step.quality.passed:  # then it ran its two pairs (min_pairs = max_pairs = 2 here)
        assert len(dtype_step.pairs) == 2
        d = decide("memory", dtype_step.pairs)
        assert (dtype_step.verdict, dtype_step.accepted, dtype_step.delta) == (d.verdict, d.accepted, d.delta)
        assert dtype_step.objective == float(np.median([p.candidate for p in dtype_step.pairs]))
    for s in steps[1:]:
        if s.verdict in ("kept", "rejected") and s.delta is not None:
            assert abs(s.delta) > s.noise


def test_results_are_durable_and_resume_reruns_nothing_finished(finished):
    run, facts, steps, _ = finished
    lines = run.results.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(x)["kind"] == "tune-step" for x in lines)
    events = []
    again = tune(Run(run.path), facts, events.append)
    assert not [e for e in events if e["event"] == "trial"]  # the budget is spent: nothing re-run
    assert [s.model_dump() for s in again] == [s.model_dump() for s in steps]


def test_a_truncated_last_line_is_ignored_with_a_warning_and_that_step_rerun(finished, tmp_path):
    run, facts, steps, _ = finished
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "spec.json").write_text((run.path / "spec.json").read_text())
    (copy / "logprobs").mkdir()
    for p in (run.path / "logprobs").iterdir():
        (copy / "logprobs" / p.name).write_bytes(p.read_bytes())
    lines = run.results.read_text().splitlines()
    (copy / "results.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][: len(lines[2]) // 2])
    r = Run(copy)
    events = []
    resumed = tune(r, facts, events.append)
    assert any("incomplete" in w for w in r.warnings)
    assert {e["index"] for e in events if e["event"] == "trial"} == {2}  # only the lost step
    assert len(resumed) == 3
    again = Run(copy)  # the re-run step's line went on a line of its own, not onto the cut one
    assert [s.index for s in again.steps()] == [0, 1, 2] and len(again.warnings) == 1


def test_report_files(finished):
    run, facts, steps, _ = finished
    r = report.write(run.path, run.spec(), steps, facts)
    assert r["kind"] == "tune-report" and r["best"]["python"].count("from_pretrained") == 2
    env = r["environment"]
    assert isinstance(env["busy"], bool) and env["load_average"] >= 0 and env["cores"] >= 1
    for row, s in zip(r["steps"], steps, strict=True):
        assert (row["verdict"], row["delta"], row["noise"]) == (s.verdict, s.delta, s.noise)
        assert row["repeats"] == (len(s.pairs) if s.technique else 1) and isinstance(row["busy"], bool)
    md = (run.path / "report.md").read_text()
    for section in (
        "## Verdict",
        "## Steps (measured)",
        "estimate",
        "## The configuration to ship",
        "## Environment",
        "interleaved pairs",
    ):
        assert section in md
    assert f"Greedy output for prompt 0 (measured): `{r['best']['greedy_output_prompt_0']}`" in md
    html = (run.path / "report.html").read_text()
    # objective per step, latency and memory, quality, memory versus context (no percentiles at concurrency 1)
    assert html.count("data:image/svg+xml;base64,") == 4
    ctx = r["memory_vs_context"]  # the estimate beside what the trials measured, labelled as such
    assert ctx["kind"] == "estimate" and len(ctx["estimate_bytes"]["baseline"]) == len(ctx["input_tokens"])
    assert ctx["measured"][0]["setup"] == "baseline" and ctx["measured"][0]["bytes"] > 0
    assert (run.path / "best.yaml").exists()


def _trial(tokens: list[list[int]], nll: float | None) -> TrialResult:
    m = TrialMetrics(
        memory_kind="cpu_rss",
        load_s=1,
        baseline_memory_bytes=1,
        peak_memory_bytes=2,
        peak_memory_load_bytes=2,
        peak_memory_generate_bytes=2,
        cpu_peak_rss_bytes=2,
        weights_bytes=1,
        ttft_s=0.1,
        ttft_p50_s=0.1,
        ttft_p95_s=0.1,
        tpot_s=0.01,
        tpot_p50_s=0.01,
        tpot_p95_s=0.01,
        e2e_s=0.2,
        e2e_p50_s=0.2,
        e2e_p95_s=0.2,
        tokens_per_s=10,
        output_tokens=4,
        input_tokens_mean=3,
        requests=len(tokens),
        generate_calls=len(tokens),
        reference_nll=nll,
    )
    outs = [
        RequestOutput(prompt_index=i, input_tokens=3, output_token_ids=t, text="", finish="length")
        for i, t in enumerate(tokens)
    ]
    return TrialResult(status="ok", config={}, workload=Workload(), model_path="-", metrics=m, outputs=outs)


def test_quality_gate_passes_identical_and_rejects_broken_outputs(tmp_path):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(10, 50))
    base_lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.save(tmp_path / "a.npy", base_lp.astype(np.float32))
    np.save(tmp_path / "b.npy", base_lp.astype(np.float32))
    broken = np.roll(base_lp, 7, axis=-1)  # a different distribution at every position
    np.save(tmp_path / "c.npy", broken.astype(np.float32))
    base = _trial([[1, 2, 3, 4], [5, 6, 7, 8]], 2.0)
    same = compare(base, _trial([[1, 2, 3, 4], [5, 6, 7, 8]], 2.0), tmp_path / "a.npy", tmp_path / "b.npy")
    assert same.passed and same.exact_match_rate == 1 and same.mean_first_divergence is None
    assert same.max_kl == pytest.approx(0, abs=1e-6)
    bad = compare(base, _trial([[9, 9, 9, 9], [5, 6, 0, 0]], 2.6), tmp_path / "a.npy", tmp_path / "c.npy")
    assert not bad.passed and bad.exact_match_rate == 0 and bad.mean_first_divergence == 1.0
    assert bad.nll_delta == pytest.approx(0.6) and bad.max_kl > Tolerance().max_kl
    assert len(bad.reasons) == 3 and any("greedy outputs match on 0%" in r for r in bad.reasons)


def test_serve_variants_switch_continuous_batching_and_drop_what_serve_refuses(tiny_model):
    facts = _host_facts(
        _spec(tiny_model, workload=Workload(model=str(tiny_model), concurrency=4, input_len=300, max_new_tokens=20)),
        profile_model(tiny_model),
    )
    plain = Setup(dtype="bfloat16", attn="sdpa", compile=True, kv_cache="static")
    (l1, f1), (l2, f2) = serve_variants(facts, plain)
    assert f1 == ["--dtype", "bfloat16", "--attn-implementation", "sdpa", "--compile"]
    assert l2 == "transformers serve, continuous batching" and "--compile" not in f2
    # the paged cache is sized to the workload: 4 requests x (2 blocks of 256 for 320 tokens + 1 spare)
    assert f2[f2.index("--continuous-batching") :] == [
        "--continuous-batching",
        "--cb-max-batch-tokens",
        "1200",
        "--cb-block-size",
        "256",
        "--cb-num-blocks",
        "12",
    ]
    cb = Setup(attn="paged|sdpa", batching="continuous", max_batch_tokens=256)
    assert serve_variants(facts, cb)[0][1][-3:] == ["--continuous-batching", "--cb-max-batch-tokens", "256"]
    assert "--continuous-batching" not in serve_variants(facts, cb)[1][1]
    assert serve_variants(facts, Setup(tp=2)) == [] and serve_variants(facts, Setup(engine="vllm")) == []


def test_serve_stage_compares_both_batching_modes_lists_missing_engines_and_ships_the_measured_choice(
    tiny_model, tmp_path, infertune_home, request
):
    """transformers serve without and with continuous batching on the same load, measured in rounds; with no
    engine installed (INFERTUNE_HOME is empty) vLLM and SGLang are rows that say "not measured" and how to install
    them; the ship-it command is the command of the variant the noise-aware choice picked, and nothing re-runs
    on resume."""
    import io

    from rich.console import Console

    from infertune.cli.tune_output import served_table
    from infertune.tuning.serve_stage import choose

    wl = Workload(
        model=str(tiny_model), prompts=["Once upon a time", "The sea is"], max_new_tokens=4, warmup=0, concurrency=2
    )
    run = Run.create(tmp_path / "r", _spec(tiny_model, workload=wl, max_trials=1, objective="throughput", serve=True))
    facts = _host_facts(run.spec(), profile_model(tiny_model))
    steps = tune(run, facts)
    events = []
    served = serve_stage(run, facts, steps[0], events.append, rounds=2)
    assert [v.label for v in served] == [
        "transformers serve (as accepted)",
        "transformers serve, continuous batching",
        "vllm",
        "sglang",
    ]
    measured, missing = served[:2], served[2:]
    assert "--continuous-batching" in measured[1].flags and "--continuous-batching" not in measured[0].flags
    for v in measured:
        assert v.status == "ok" and v.engine == "transformers" and v.trial.kind == "measured"
        assert "--host 127.0.0.1" in v.trial.command and v.trial.startup_s > 0 and v.trial.peak_memory_bytes > 0
        assert [lv.concurrency for lv in v.trial.load.levels] == [1, 2]  # the rounds are not extra levels
        assert all(lv.requests_ok == 4 and lv.requests_failed == 0 for lv in v.trial.load.levels)
        assert len(v.rounds) == 2 and v.objective == float(np.median(v.rounds)) and v.spread is not None
        # the level shown at the workload's concurrency is the median round (of 2: the one nearer the median)
        assert v.trial.load.levels[1].output_tokens_per_s in v.rounds
    for v, name in zip(missing, ("vllm", "sglang")):
        assert v.engine == name and v.status == "not measured" and v.trial is None and v.objective is None
        assert v.install == f"infertune engines install {name}" and "not installed" in v.error
    assert serve_stage(run, facts, steps[0], events.append) == served  # resumed: nothing re-runs
    assert sum(e["event"] == "serve" for e in events) == 2
    r = report.write(run.path, run.spec(), steps, facts, served=Run(run.path).serve_steps())
    winner, _ = choose("throughput", served)
    assert winner in measured
    assert [v["chosen"] for v in r["served"]] == [v is winner for v in served]
    assert r["best"]["serve_measured"] and r["best"]["serve"] == winner.trial.shell(str(tiny_model))
    rows = {v["label"]: v for v in r["served"]}
    assert rows["vllm"]["status"] == "not measured" and rows["vllm"]["install"] == "infertune engines install vllm"
    assert rows[winner.label]["verdict"] == "chosen" and r["serving_engine"] == []  # no engine measured
    md = (run.path / "report.md").read_text()
    assert "## Served (measured" in md and "infertune engines install vllm" in md and "start-up" in md
    page = (run.path / "report.html").read_text()
    assert "Served: latency and throughput versus load" in page and "infertune engines install vllm" in page
    # objective, latency and memory, percentiles (concurrency 2), memory vs context, served (no quality chart: the
    # baseline is the only step); laid out in a browser when one is here
    assert page.count("data:image/svg+xml;base64,") == 5
    if shutil.which("chromium"):
        seen = request.getfixturevalue("browser").layout(run.path / "report.html")
        assert seen["wide"] == [] and len(seen["images"]) == 5 and all(i["loaded"] for i in seen["images"])
    text = io.StringIO()
    Console(file=text, width=250).print(served_table(r))
    assert "not measured: infertune engines install vllm" in text.getvalue() and "start-up s" in text.getvalue()
    # the run is evidence for the advisor (`advise --measured RUN`): here no engine was measured, so none is carried
    from infertune import api
    from infertune.core.errors import UserError

    a = api.advise(model=str(tiny_model), measured=run.path, concurrency=2)
    assert all(not r.measured for r in a.recommendations)
    with pytest.raises(UserError, match="measured .* not demo"):
        api.advise(model="demo", measured=run.path)


def test_report_command_rebuilds_from_finished_trials(finished):
    import subprocess
    import sys

    run, facts, steps, _ = finished
    (run.path / "report.json").unlink(missing_ok=True)  # as after an interrupted run
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "report", str(run.path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "tune-report" and d["schema_version"] == "1" and len(d["steps"]) == len(steps)
    assert (run.path / "report.json").exists()
    md = subprocess.run(
        [sys.executable, "-m", "infertune", "report", str(run.path)], capture_output=True, text=True, timeout=120
    )
    assert md.returncode == 0 and md.stdout.startswith("# infertune tune report")
    missing = subprocess.run(
        [sys.executable, "-m", "infertune", "report", str(run.path / "nope")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1


def test_a_candidate_that_changes_outputs_beyond_tolerance_is_rejected_with_its_numbers(tiny_model, tmp_path):
    """A real loop with a tolerance no rounding passes: bf16 moves the next-token distributions of the
    fp32 baseline, so the dtype step is measured, gated, rejected with its quality numbers, and the
    report keeps the baseline."""
    spec = _spec(tiny_model, max_trials=2, tolerance=Tolerance(max_kl=1e-12))
    run = Run.create(tmp_path / "r", spec)
    facts = _host_facts(run.spec(), profile_model(tiny_model))
    steps = tune(run, facts)
    step = next(s for s in steps if s.technique == "dtype")
    assert step.trial.status == "ok" and not step.quality.passed and not step.accepted
    assert step.verdict == "rejected" and step.delta is None and step.pairs == []  # not on the objective
    assert step.quality.max_kl > 1e-12
    assert step.reason.startswith("quality: ") and "KL" in step.reason
    r = report.write(run.path, spec, steps, facts, run.warnings)
    assert r["best"]["setup"]["dtype"] == "float32"
    assert "KL" in (run.path / "report.md").read_text()


MiB = 2**20


def _pairs(inc: list[float], cand: list[float], inc_mem: float = 903 * MiB, cand_mem: float = 903 * MiB) -> list[Pair]:
    return [
        Pair(incumbent=a, candidate=b, incumbent_tie=inc_mem * (1 + k * 1e-4), candidate_tie=cand_mem * (1 + k * 1e-4))
        for k, (a, b) in enumerate(zip(inc, cand, strict=True))
    ]


def test_a_clear_difference_is_kept_or_rejected_and_a_noisy_one_is_inconclusive():
    faster = decide("latency", _pairs([1.40, 1.52, 1.45], [1.10, 1.21, 1.13]))
    assert faster.verdict == "kept" and faster.accepted and faster.delta < 0 and abs(faster.delta) > faster.noise
    slower = decide("latency", _pairs([1.40, 1.52, 1.45], [1.70, 1.80, 1.76]))
    assert slower.verdict == "rejected" and not slower.accepted and abs(slower.delta) > slower.noise
    # a busy machine: one pair says 2x faster, another 1.6x slower; the median moves, the band moves more
    noisy = decide("latency", _pairs([1.40, 3.60, 1.45], [0.70, 2.20, 2.30]))
    assert noisy.verdict == "inconclusive" and not noisy.accepted and abs(noisy.delta) <= noisy.noise
    assert "inconclusive" in noisy.reason and "3 interleaved pairs" in noisy.reason
    tiny = decide("latency", _pairs([1.000, 1.001, 1.002], [0.990, 0.991, 0.992]))  # clear, but 1 %
    assert tiny.verdict == "rejected" and not tiny.accepted and "worth a change" in tiny.reason
    more = decide("throughput", _pairs([10.0, 10.5, 10.2], [12.0, 12.4, 12.3]))
    assert more.verdict == "kept" and more.delta > 0  # higher is better for throughput


def test_a_tie_on_the_objective_is_broken_by_a_clear_gain_on_the_other_axis():
    """bf16 on a CPU without native bf16: the same latency at half the memory is adopted (the objective
    stays inconclusive, the memory gain is clear); the same latency at the same memory is not, nor is a
    clear latency loss at any memory."""
    tie = decide("latency", _pairs([1.445, 1.50, 1.43], [1.456, 1.47, 1.46], cand_mem=398 * MiB))
    assert tie.accepted and tie.verdict == "inconclusive" and abs(tie.delta) <= tie.noise
    assert (
        tie.tie.delta < -0.10
        and tie.tie.clear
        and "kept on the tie" in tie.reason
        and "903 MiB -> 398 MiB" in tie.reason
    )
    small = decide("latency", _pairs([1.445, 1.50, 1.43], [1.456, 1.47, 1.46], cand_mem=880 * MiB))
    assert not small.accepted and small.verdict == "inconclusive"  # memory only 2.5 % better
    worse = decide("latency", _pairs([1.445, 1.50, 1.43], [1.60, 1.66, 1.59], cand_mem=398 * MiB))
    assert worse.verdict == "rejected" and not worse.accepted
    mem = decide(
        "memory",
        [
            Pair(
                incumbent=903.0 * MiB,
                candidate=(903.0 + k) * MiB,
                incumbent_tie=1.4 + k / 100,
                candidate_tie=1.0 + k / 100,
            )
            for k in range(3)
        ],
    )
    assert mem.accepted and mem.reason.startswith("memory") and "latency" in mem.reason


def test_the_served_choice_never_switches_on_a_difference_within_the_spread():
    """The decision rule alone, on given figures: the simpler stack stays unless a later variant meets the limits
    and its ratio clears both spreads added (and MIN_GAIN); a variant with no spread (one round) cannot win."""
    from infertune.tuning.run import ServeStep
    from infertune.tuning.serve_stage import choose

    def v(label, rounds, slo=(), engine="transformers"):
        from infertune.measure.stats import spread

        return ServeStep(
            label=label,
            engine=engine,
            flags=[],
            trial=None,
            objective=float(np.median(rounds)),
            rounds=rounds,
            spread=spread(rounds),
            slo_missed=list(slo),
        )

    plain, cb = v("plain", [10.0, 11.0, 12.0]), v("cb", [11.5, 12.0, 12.5])  # +9 %, spreads 9 % + 4 %
    assert choose("throughput", [plain, cb])[0] is plain
    rows = choose("throughput", [plain, cb])[1]
    assert rows[1].verdict.startswith("within the spread") and rows[1].ratio == pytest.approx(12 / 11)
    assert rows[1].noise == pytest.approx(plain.spread + cb.spread)
    vllm = v("vllm", [24.0, 25.0, 26.0], engine="vllm")  # 2.3x: clear of any spread here
    chosen, rows = choose("throughput", [plain, cb, vllm])
    assert chosen is vllm and [r.verdict for r in rows][:1] == ["clearly worse"]
    assert choose("throughput", [plain, v("vllm", [24.0, 25.0, 26.0], ["TTFT p95 2 s > 1 s"])])[0] is plain
    assert choose("throughput", [plain, v("one round", [40.0])])[0] is plain  # no spread: no verdict
    slow = v("slow", [2.0, 2.1, 2.2])  # latency: lower is better
    assert choose("latency", [slow, v("fast", [1.0, 1.05, 1.1])])[0].label == "fast"
    missing = ServeStep(
        label="sglang",
        engine="sglang",
        flags=[],
        trial=None,
        objective=None,
        error="not installed",
        install="infertune engines install sglang",
    )
    chosen, rows = choose("throughput", [plain, missing])
    assert chosen is plain and rows[1].verdict == "not measured"


def _timed(e2e: float) -> TrialResult:
    t = _trial([[1, 2, 3, 4]], None)
    t.metrics = t.metrics.model_copy(update={"e2e_s": e2e})
    return t

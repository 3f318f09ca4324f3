"""The trial runner on tiny models, in real child processes."""

import signal
import stat
import time

import psutil
import pytest

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure import run_trial
from infertune.measure.trial import classify_exit


def _fake_python(tmp_path, body: str) -> str:
    """An 'interpreter' for the child that misbehaves the way real ones do (crash, garbage, hang)."""
    script = tmp_path / "python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_ok_trial_measures_everything(tiny_model):
    wl = Workload(model=str(tiny_model), max_new_tokens=6, warmup=1, repeats=2)
    events = []
    r = run_trial(InferenceConfig(), wl, tiny_model, timeout_s=300, on_event=events.append)
    assert r.status == "ok", (r.error, r.log_tail)
    assert r.kind == "measured" and r.device == "cpu"
    m = r.metrics
    assert m.requests == 4 * 2 and m.generate_calls == 4 * 2  # 4 default prompts, 2 timed passes
    assert 0 < m.ttft_s <= m.e2e_s and m.ttft_p50_s <= m.ttft_p95_s
    assert m.load_s > 0 and m.tokens_per_s > 0
    assert m.memory_kind == "cpu_rss"
    assert m.peak_memory_bytes >= m.peak_memory_generate_bytes >= m.baseline_memory_bytes > 0
    assert m.weights_bytes > 0
    assert len(r.outputs) == 4 and all(1 <= len(o.output_token_ids) <= 6 for o in r.outputs)
    assert m.output_tokens >= sum(len(o.output_token_ids) for o in r.outputs)
    assert r.environment["libraries"]["torch"]
    phases = [e["phase"] for e in events if e["event"] == "phase"]
    assert phases == ["import", "load", "generate"]
    assert [e["done"] for e in events if e["event"] == "progress"] == list(range(1, 1 + 4 * 2 + 1))  # 1 warmup call


def test_fixed_length_batched_and_sized_inputs(tiny_model):
    wl = Workload(
        model=str(tiny_model),
        prompts=["Paris is", "The sea"],
        batch=2,
        input_len=48,
        max_new_tokens=5,
        ignore_eos=True,
        warmup=0,
    )
    r = run_trial(InferenceConfig(attn_implementation="eager", dtype="float32"), wl, tiny_model, timeout_s=300)
    assert r.status == "ok", (r.error, r.log_tail)
    assert r.metrics.generate_calls == 1 and r.metrics.requests == 2
    assert r.metrics.output_tokens == 2 * 5  # ignore_eos: every request generates exactly max_new_tokens
    assert r.metrics.tpot_s > 0 and r.metrics.tpot_p50_s <= r.metrics.tpot_p95_s
    assert all(o.input_tokens == 48 and o.finish == "length" for o in r.outputs)
    assert r.metrics.input_tokens_mean == 48


def test_greedy_outputs_are_reproducible_across_trials(tiny_model):
    wl = Workload(model=str(tiny_model), prompts=["Paris is"], max_new_tokens=8, warmup=0)
    a = run_trial(InferenceConfig(), wl, tiny_model, timeout_s=300)
    b = run_trial(InferenceConfig(attn_implementation="eager"), wl, tiny_model, timeout_s=300)
    assert a.outputs[0].output_token_ids == b.outputs[0].output_token_ids


def test_timeout_is_a_result_and_kills_the_child(tiny_model):
    r = run_trial(InferenceConfig(), Workload(model=str(tiny_model)), tiny_model, timeout_s=1)
    assert r.status == "timeout" and "timed out after 1 s" in r.error
    workers = [
        c for c in psutil.Process().children(recursive=True) if "infertune.measure.worker" in " ".join(c.cmdline())
    ]
    assert workers == []  # the timed-out worker was killed, not left running


def test_an_exception_in_the_child_is_an_error_result(tiny_model):
    # flash_attention_2 needs the flash-attn package and a GPU: loading fails inside the child.
    wl = Workload(model=str(tiny_model), max_new_tokens=2, warmup=0)
    r = run_trial(InferenceConfig(attn_implementation="flash_attention_2"), wl, tiny_model, timeout_s=300)
    assert r.status == "error" and r.error and r.metrics is None
    assert r.log_tail  # the child's traceback is kept for the user


def test_a_workload_the_model_cannot_take_is_an_input_error(tiny_model):
    wl = Workload(model=str(tiny_model), input_len=2, warmup=0)
    r = run_trial(InferenceConfig(), wl, tiny_model, timeout_s=300)
    assert r.status == "error" and r.error_type == "input" and "input_len 2" in r.error


def test_a_crashing_child_is_recorded(tmp_path, tiny_model):
    py = _fake_python(tmp_path, "kill -SEGV $$")
    r = run_trial(InferenceConfig(), Workload(), tiny_model, python=py)
    assert r.status == "error" and r.error == "crashed with SIGSEGV"


def test_garbage_output_and_no_result(tmp_path, tiny_model):
    py = _fake_python(tmp_path, "echo '{not json'; echo 'Segmentation fault?'; exit 3")
    r = run_trial(InferenceConfig(), Workload(), tiny_model, python=py)
    assert r.status == "error" and "exited with code 3" in r.error and "Segmentation fault?" in r.error


def test_a_hung_child_and_its_children_are_killed(tmp_path, tiny_model):
    marker = tmp_path / "grandchild.pid"
    py = _fake_python(tmp_path, f"sleep 300 & echo $! > {marker}; wait")
    r = run_trial(InferenceConfig(), Workload(), tiny_model, timeout_s=1, python=py)
    assert r.status == "timeout"
    pid = int(marker.read_text())
    time.sleep(0.2)
    # The whole process group went down, not only the direct child (a zombie awaits its reaper: dead).
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize(
    "code, status, text",
    [(-signal.SIGKILL, "oom", "out-of-memory killer"), (-signal.SIGSEGV, "error", "SIGSEGV"), (1, "error", "code 1")],
)
def test_classify_exit(code, status, text):
    s, msg = classify_exit(code)
    assert s == status and text in msg


def test_a_trial_past_its_memory_limit_is_oom_and_the_next_one_runs(tiny_model):
    # eager attention materialises 4 x 4 heads x 2048 x 2048 fp32 scores: 256 MiB, twice over a 128 MiB limit
    wl = Workload(model=str(tiny_model), prompts=["Hello"], input_len=2048, batch=4, max_new_tokens=2, warmup=0)
    cfg = InferenceConfig(attn_implementation="eager")
    starved = run_trial(cfg, wl, tiny_model, timeout_s=300, memory_limit_bytes=128 << 20)
    assert starved.status == "oom" and starved.metrics is None, (starved.error, starved.log_tail)
    assert "allocate" in starved.error
    fine = run_trial(cfg, wl, tiny_model, timeout_s=300, memory_limit_bytes=4 << 30)
    assert fine.status == "ok", fine.error


def test_the_parents_memory_does_not_grow_with_trials(tmp_path, tiny_model):
    """Each trial's state lives in its child: many failed trials leave the parent as it was."""
    py = _fake_python(tmp_path, "echo '{not json'; kill -SEGV $$")
    me = psutil.Process()
    for _ in range(5):  # warm up imports and caches first
        run_trial(InferenceConfig(), Workload(), tiny_model, python=py)
    before = me.memory_info().rss
    results = [run_trial(InferenceConfig(), Workload(), tiny_model, python=py) for _ in range(40)]
    assert {r.status for r in results} == {"error"}
    assert me.memory_info().rss - before < 8 * 2**20

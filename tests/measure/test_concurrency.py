"""Concurrent requests in a trial: a burst of N requests run serially, as one padded batch, or through
continuous batching (generate_batch), with per-request TTFT that includes queueing."""

import json
import subprocess
import sys

import pytest

from infertune.core.config import InferenceConfig
from infertune.core.workload import Workload
from infertune.measure import run_trial


@pytest.fixture(scope="module")
def bursts(tiny_model):
    wl = Workload(
        model=str(tiny_model),
        prompts=["Once upon a time", "The sea is", "Hello there"],
        max_new_tokens=6,
        concurrency=4,
        warmup=1,
        repeats=2,
        ignore_eos=True,
    )
    configs = {
        "serial": InferenceConfig(),
        "static": InferenceConfig(batching="static"),
        "continuous": InferenceConfig(batching="continuous", max_batch_tokens=64, cb_block_size=32),
    }
    return {mode: run_trial(cfg, wl, tiny_model, timeout_s=300) for mode, cfg in configs.items()}


@pytest.mark.parametrize("mode", ["serial", "static", "continuous"])
def test_every_request_of_every_timed_burst_is_measured(bursts, mode):
    r = bursts[mode]
    assert r.status == "ok", (r.error, r.log_tail)
    m = r.metrics
    assert m.concurrency == 4 and m.requests == 8 and m.output_tokens == 8 * 6
    assert m.ttft_p50_s <= m.ttft_p95_s <= m.ttft_p99_s and m.requests_per_s > 0
    assert {o.prompt_index for o in r.outputs} == {0, 1, 2}


def test_serial_requests_queue_and_a_static_batch_does_not(bursts):
    """Structure, not timing ratios (how much queueing costs is measured in benchmarks/concurrency.py): in
    one padded batch every request of a burst gets its first token at the same step, so the burst's TTFTs
    are equal (two rounds: two values, and p95 = p99 = the slower round's); served one after another, each
    request waits for those before it, so no two TTFTs of a round are equal."""
    serial, static = bursts["serial"].metrics, bursts["static"].metrics
    assert static.ttft_p95_s == pytest.approx(static.ttft_p99_s, rel=1e-9)
    assert serial.ttft_p99_s > serial.ttft_p95_s > serial.ttft_p50_s


def test_measure_cli_takes_concurrency_and_batching(tiny_model):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "infertune",
            "measure",
            "--model",
            str(tiny_model),
            "--max-new-tokens",
            "4",
            "--concurrency",
            "3",
            "--batching",
            "static",
            "--warmup",
            "0",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["config"]["batching"] == "static" and d["metrics"]["concurrency"] == 3 and d["metrics"]["requests"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "infertune", "measure", "--model", str(tiny_model), "--batching", "sometimes"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "batching" in bad.stderr


def test_poisson_arrivals_are_seeded_and_serial_requests_wait_for_their_arrival(tiny_model):
    wl = Workload(
        model=str(tiny_model),
        prompts=["Once upon a time"],
        max_new_tokens=4,
        concurrency=4,
        arrival="poisson",
        rate=20.0,
        seed=3,
        warmup=0,
        ignore_eos=True,
    )
    a = wl.arrivals(4)
    assert a == wl.arrivals(4) and a[0] == 0 and a == sorted(a) and a[-1] > 0  # same every run, increasing
    r = run_trial(InferenceConfig(batching="serial"), wl, tiny_model, timeout_s=300)
    assert r.status == "ok", r.error
    # the round lasts at least until the last request arrived
    assert r.metrics.requests == 4 and 4 / r.metrics.requests_per_s >= a[-1]
    bad = run_trial(InferenceConfig(batching="continuous"), wl, tiny_model, timeout_s=300)
    assert bad.status == "error" and bad.error_type == "input" and "poisson" in bad.error


def test_poisson_needs_a_rate():
    with pytest.raises(ValueError, match="needs a rate"):
        Workload(arrival="poisson")


@pytest.mark.parametrize("mode", ["static", "continuous"])
def test_mixed_prompt_lengths_are_kept_per_request(tiny_model, mode):
    """A padded batch and continuous batching both see each request at its own length."""
    wl = Workload(
        model=str(tiny_model),
        prompts=["Hello"],
        input_lens=[16, 48],
        max_new_tokens=3,
        concurrency=2,
        warmup=0,
        ignore_eos=True,
    )
    r = run_trial(InferenceConfig(batching=mode), wl, tiny_model, timeout_s=300)
    assert r.status == "ok", (r.error, r.log_tail)
    assert sorted(o.input_tokens for o in r.outputs) == [16, 48] and r.metrics.input_tokens_mean == 32

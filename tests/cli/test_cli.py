"""The `infertune` command as a user runs it: a real process, real exit codes, real stderr."""

import json
import os
import re
import subprocess
import sys

import pytest


def run(*args, env=None, cwd=None):
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "infertune", *args], capture_output=True, text=True, env=full_env, cwd=cwd, timeout=600
    )


def test_version_and_help():
    from infertune import __version__

    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"infertune {__version__}"
    r = run("--help")
    assert r.returncode == 0 and "measure" in r.stdout and "models" in r.stdout


def test_env_json():
    r = run("env", "--format", "json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["hardware"]["cpu_logical_cores"] >= 1 and "transformers" in data["libraries"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["measure", "--batch", "abc"], "--batch"),
        (["measure", "--max-new-tokens", "0"], "--max-new-tokens 0: allowed 1 to"),
        (["measure", "--attn", "warp-drive"], "unknown attention implementation"),
        (["measure", "--model", "no-org/no-model-here"], "not in the local Hugging Face cache"),
        (["measure", "--no-such-flag"], "--no-such-flag"),
        (["models", "prepare", "gpt-17"], "unknown embedded model"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path):
    r = run(*args, env={"INFERTUNE_HOME": str(tmp_path)})
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr


def test_malformed_workload_file(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text("max_new_tokens: [oops\n")
    r = run("measure", "--workload", str(f))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "w.yaml" in r.stderr


def test_measure_json_and_output_file(tiny_model, tmp_path):
    out = tmp_path / "result.json"
    r = run(
        "measure",
        "--model",
        str(tiny_model),
        "--max-new-tokens",
        "4",
        "--repeats",
        "1",
        "--format",
        "json",
        "--output",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["kind"] == "measured" and data["status"] == "ok"
    assert {"status", "config", "workload", "metrics", "environment", "kind"} <= set(data)
    m = data["metrics"]
    for key in ("load_s", "peak_memory_bytes", "ttft_s", "tpot_s", "e2e_s", "tokens_per_s", "output_tokens"):
        assert key in m
    assert m["ttft_s"] > 0 and m["output_tokens"] > 0
    assert json.loads(out.read_text()) == data
    est = data["estimate"]  # predicted beside measured, under its own label
    assert est["kind"] == "estimate-vs-measured" and est["measured_peak_memory_bytes"] > 0
    assert est["tpot_fraction_of_roofline"] > 0 and est["predicted_peak_memory_bytes"] > 0
    assert est["expected_tpot_s"] > 0 and est["expected_ttft_s"] > 0
    assert est["tpot_expected_over_measured"] == pytest.approx(est["expected_tpot_s"] / m["tpot_s"])
    assert est["expected_tpot_band"].startswith("no validation rows")  # no CPU kind has validation rows yet


def test_measure_table_and_timeout_is_exit_0(tiny_model):
    r = run("measure", "--model", str(tiny_model), "--timeout", "1")
    assert r.returncode == 0, r.stderr
    assert "timeout" in r.stdout and "timed out after 1 s" in r.stdout


def test_measure_input_error_found_in_the_child_is_exit_2(tiny_model):
    r = run("measure", "--model", str(tiny_model), "--input-len", "2", "--format", "json")
    assert r.returncode == 2 and "input_len 2" in r.stderr
    assert json.loads(r.stdout)["error_type"] == "input"  # the result is still printed


def test_models_list_empty_and_profile(tiny_model, tmp_path):
    r = run("models", "list", "--format", "json", env={"INFERTUNE_HOME": str(tmp_path)})
    assert r.returncode == 0 and json.loads(r.stdout)["models"] == []
    r = run("profile", "--model", str(tiny_model), "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["num_kv_heads"] == 2


def test_hub_id_resolves_from_the_local_hf_cache(tiny_model, tmp_path):
    import shutil

    repo = tmp_path / "hub" / "models--acme--tiny-llama"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(tiny_model, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    r = run("profile", "--model", "acme/tiny-llama", "--format", "json", env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"].endswith(commit)
    r = run("profile", "--model", "acme/other", env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    assert r.returncode == 2 and "HF_HUB_OFFLINE is set and acme/other is not in the local" in r.stderr


def test_estimate_json_shape(tiny_model):
    r = run("estimate", "--model", str(tiny_model), "--gpu", "A100 80GB", "--input-len", "512", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "estimate"
    for key in (
        "weights_bytes",
        "kv_cache_bytes",
        "state_bytes",
        "attention_scratch_bytes",
        "activations_bytes",
        "logits_bytes",
        "overhead_bytes",
        "total_bytes",
        "per_device",
    ):
        assert key in d["memory"]
    for key in ("prefill_s", "tpot_s", "tokens_per_s", "bound", "expected", "limited_by"):
        assert key in d["speed"]
    sp = d["speed"]
    assert set(sp["expected"]) >= {"ttft_s", "tpot_s", "tokens_per_s"} and set(sp["bound"]) >= {"ttft_s", "tpot_s"}
    assert sp["bound"]["tpot_s"] == sp["tpot_s"]  # the deprecated top-level figures are the bound
    assert sp["expected"]["tpot_s"] > sp["bound"]["tpot_s"]  # a tiny model on a GPU: launch-bound, far from it
    assert d["fits"] == {"cuda:0": True} and d["settings"]["input_len"] == 512
    # the tiny model is built for 1024 positions: 2k + 256 tokens do not fit, whatever the memory
    r = run("estimate", "--model", str(tiny_model), "--gpu", "A100 80GB", "--input-len", "2k", "--format", "json")
    d = json.loads(r.stdout)
    assert d["fits"] == {"cuda:0": True, "context": False} and d["max_input_len"] == 1024 - 256


def test_estimate_sweep_and_cpu(tiny_model):
    r = run(
        "estimate", "--model", str(tiny_model), "--cpu", "--input-len", "128,1k", "--attn", "eager", "--format", "json"
    )
    assert r.returncode == 0, r.stderr
    sweep = json.loads(r.stdout)["sweep"]
    assert [e["settings"]["input_len"] for e in sweep] == [128, 1024]
    assert sweep[1]["memory"]["attention_scratch_bytes"] > sweep[0]["memory"]["attention_scratch_bytes"] > 0
    assert sweep[0]["accelerator"]["source"] == "measured on this host"
    r = run("estimate", "--model", str(tiny_model), "--gpu", "L4", "--input-len", "1k,4k")
    assert r.returncode == 0 and "memory versus context" in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--gpu", "H1000"], "closest"),
        (["--input-len", "lots"], "not a token count"),
        (["--quantization", "magic"], "unknown quantization"),
        (["--kv-cache", "huge"], "--kv-cache"),
        (["--gpu", "L4", "--max-memory", "gpu0=1GiB"], "unknown device"),
        (["--gpu", "L4", "--max-memory", "cpu=1GiB"], "gives no GPU a budget"),
        (["--cpu", "--max-memory", "0=1GiB"], "give --gpu NAME"),
    ],
)
def test_estimate_bad_input(tiny_model, args, needle):
    r = run("estimate", "--model", str(tiny_model), *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_estimate_placement_json(tiny_model):
    r = run(
        "estimate", "--model", str(tiny_model), "--gpu", "L4", "--max-memory", "0=1KiB,cpu=1GiB", "--format", "json"
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    devices = [x["device"] for x in d["placement"]["devices"]]
    assert devices == ["cuda:0", "cpu"] and d["placement"]["offloaded_layers"] > 0
    assert set(d["memory"]["per_device"]) == {"cuda:0", "cpu"} and d["speed"]["limited_by"] == "host-link"


def test_estimate_model_without_config_is_exit_2(tmp_path):
    r = run("estimate", "--model", str(tmp_path), "--gpu", "L4")
    assert r.returncode == 2 and "config.json" in r.stderr


def test_advise_json_contract(tiny_model, tmp_path):
    wl = tmp_path / "wl.yaml"
    wl.write_text(f"model: {tiny_model}\nmax_new_tokens: 64\nconcurrency: 8\n")
    r = run("advise", str(wl), "--gpu", "A100-80GB", "--dtype", "float32", "--format", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["kind"] == "advice" and d["schema_version"]
    assert d["workload"] == {"input_len": 512, "max_new_tokens": 64, "batch": 1, "concurrency": 8}
    assert set(d["diagnosis"]) == {"bottleneck", "ranked", "evidence"}
    assert d["diagnosis"]["bottleneck"] == "concurrency"
    rec = d["next"]
    for key in ("technique", "settings", "expected", "tradeoffs", "docs", "compatibility", "validate", "snippet"):
        assert key in rec
    assert rec["expected"]["kind"] == "estimate" and rec["compatibility"]["ok"] is True
    assert set(rec["snippet"]) == {"python", "serve"}
    assert d["recommendations"][0] == rec
    assert any("input_len = 512" in a for a in d["assumptions"])  # not a TTY: stated, and asked as a question
    assert any("prompts" in q for q in d["questions"])
    assert all(set(x) == {"technique", "reasons"} for x in d["rejected"])


def test_advise_table_names_the_next_change(tiny_model):
    r = run("advise", "--model", str(tiny_model), "--gpu", "T4", "--dtype", "float32", "--input-len", "1k")
    assert r.returncode == 0, r.stderr
    assert "Diagnosis" in r.stdout and "Next: one change" in r.stdout and "estimate" in r.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--gpu", "H1000"], "closest"),
        (["--quantization", "magic"], "--quantization"),
        (["--batching", "sometimes"], "--batching"),
        (["--gpu", "L4", "--vram", "lots"], "--vram"),
        (["--dtype", "int3"], "--dtype"),
    ],
)
def test_advise_bad_input(tiny_model, args, needle):
    r = run("advise", "--model", str(tiny_model), *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--max-memory", "1KB"], "below the weights of every candidate"),
        (["--objective", "speed"], "--objective"),
        (["--min-quality", "2"], "--min-quality"),
        (["--max-memory", "lots"], "--max-memory"),
    ],
)
def test_tune_refuses_bad_input_before_any_trial(tiny_model, tmp_path, args, needle):
    r = run("tune", "--model", str(tiny_model), "--output", str(tmp_path / "run"), *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_tune_resume_of_a_non_run_directory_is_exit_2(tmp_path):
    r = run("tune", "--resume", str(tmp_path))
    assert r.returncode == 2 and "not a tune run directory" in r.stderr


@pytest.mark.parametrize(
    "command, kind, needle",
    [
        ("measure", "existing folder", "is a folder"),
        ("measure", "under a file", "is a file, so nothing can be created"),
        ("tune", "existing file", "is a file: give a folder"),
        ("tune", "under a file", "is a file, so nothing can be created"),
        ("report", "existing file", "not a run folder"),
        ("loadtest", "existing file", "is a file: give a folder"),
        ("serve-trial", "existing file", "is a file: give a folder"),
    ],
)
def test_every_output_path_is_checked_before_any_work(tmp_path, command, kind, needle):
    """The model named here does not exist: the output is refused first, so no model is looked up, no
    trial runs. (An unwritable folder is checked too, but the tests run as root, who can write anywhere.)"""
    afile = tmp_path / "afile"
    afile.write_text("x")
    target = {"existing folder": tmp_path, "existing file": afile, "under a file": afile / "x"}[kind]
    args = {
        "measure": ["measure", "--model", "no-org/no-model-here", "--output", str(target)],
        "tune": ["tune", "--model", "no-org/no-model-here", "--output", str(target)],
        "report": ["report", str(target)],
        "loadtest": ["loadtest", "--url", "http://127.0.0.1:9", "--output", str(target)],
        "serve-trial": ["serve-trial", "--model", "no-org/no-model-here", "--output", str(target)],
    }[command]
    r = run(*args)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert afile.read_text() == "x"


def test_a_finished_result_that_cannot_be_written_is_printed_instead(tmp_path, capsys):
    from infertune.core.paths import write_or_print

    said = []
    (tmp_path / "afile").write_text("")
    assert not write_or_print(tmp_path / "afile" / "x.json", '{"kind": "measured"}\n', said.append)
    assert capsys.readouterr().out.endswith('{"kind": "measured"}\n')
    assert "could not write" in said[-1] and "printed above" in said[-1]


def test_advise_measured_file_must_be_a_measure_result(tiny_model, tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    r = run("advise", "--model", str(tiny_model), "--gpu", "L4", "--measured", str(bad))
    assert r.returncode == 2 and "not a measure result" in r.stderr


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_tune_interrupted_keeps_finished_trials_and_resume_reruns_none(tiny_model, tmp_path, sig):
    import signal
    import time

    out = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "infertune",
        "tune",
        "--model",
        str(tiny_model),
        "--max-new-tokens",
        "4",
        "--warmup",
        "0",
        "--max-trials",
        "3",
        "--attn",
        "eager",  # from eager both dtype and sdpa are steps (from sdpa, flex is not: the estimate sees no change)
        "--output",
        str(out),
    ]
    # SIGINT as a terminal delivers it, even when the suite itself runs in the background (SIGINT ignored)
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    results = out / "results.jsonl"
    deadline = time.time() + 300
    while time.time() < deadline and not (results.exists() and results.read_text().count("\n") >= 1):
        time.sleep(0.2)
    proc.send_signal(getattr(signal, sig))
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "--resume" in stderr
    done = results.read_text().splitlines()
    assert 1 <= len(done) < 3
    r = run("tune", "--resume", str(out))
    assert r.returncode == 0, r.stderr
    # no terminal: one progress line per step as it finishes, instead of a live table
    assert re.search(r"^step \d \([\w-]+\): (kept|rejected|inconclusive|oom|error|timeout); ", r.stderr, re.M), r.stderr
    after = results.read_text().splitlines()
    assert after[: len(done)] == done and len(after) == 3  # finished lines untouched, only the rest measured
    assert (out / "report.json").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--gpu", "L4", "--gpus", "2", "--tp", "3"], "--tp 3 needs"),
        (["--gpu", "L4", "--device-map", "everywhere"], "--device-map"),
        (["--gpu", "L4", "--gpus", "2", "--tp", "2", "--device-map", "auto"], "exclude each other"),
        (["--gpu", "L4", "--lib", "bitsandbytes"], "--lib"),
    ],
)
def test_advise_placement_and_library_flags_refuse_bad_input(tiny_model, args, needle):
    r = run("advise", "--model", str(tiny_model), *args)
    assert r.returncode == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_advise_run_file_is_validated_as_measure_validates_it(tiny_model, tmp_path):
    wl = tmp_path / "wl.yaml"
    wl.write_text(f"model: {tiny_model}\nmax_new_tokens: 0\n")
    adv, meas = run("advise", str(wl), "--gpu", "L4"), run("measure", "--workload", str(wl))
    assert adv.returncode == meas.returncode == 2 and adv.stderr == meas.stderr and "max_new_tokens" in adv.stderr
    wl.write_text(f"model: {tiny_model}\nconfig:\n  dtype: float16\n  tp_size: 2\n  device_map: auto\n")
    adv, meas = run("advise", str(wl), "--gpu", "L4"), run("measure", "--workload", str(wl))
    assert adv.returncode == meas.returncode == 2 and adv.stderr == meas.stderr


def test_advise_describes_the_current_placement_and_library_versions(tiny_model, tmp_path):
    wl = tmp_path / "wl.yaml"
    wl.write_text(f"model: {tiny_model}\nconfig:\n  dtype: float16\n")
    r = run(
        "advise",
        str(wl),
        "--gpu",
        "A100 80GB",
        "--gpus",
        "2",
        "--tp",
        "2",
        "--quantization",
        "bnb-4bit",
        "--lib",
        "bitsandbytes=0.39.1",
        "--format",
        "json",
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["current"]["tp"] == 2 and d["current"]["dtype"] == "float16" and d["hardware"]["gpus"] == 2
    up = [x for x in d["recommendations"] if x["technique"] == "upgrade"]
    assert up and up[0]["settings"] == {"packages": {"bitsandbytes": ">=0.40.0"}}
    assert not any("Which library versions" in q for q in d["questions"])  # stated: not asked
    r = run(
        "advise", "--model", str(tiny_model), "--gpu", "L4", "--gpus", "4", "--device-map", "auto", "--format", "json"
    )
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["current"]["device_map"] == "auto" and any("--lib NAME=VERSION" in q for q in d["questions"])


def test_the_advise_prompt_reads_counts_as_the_flags_do(monkeypatch):
    from rich.prompt import Prompt

    from infertune.cli import plan

    answers = iter(["lots", "2k"])
    monkeypatch.setattr(Prompt, "ask", lambda *a, **k: next(answers))
    assert plan.ask_count("How long are the prompts, in tokens?", 512) == 2048  # the bad answer is asked again


def test_advise_terminal_output_keeps_code_in_square_brackets(tiny_model):
    """Rich markup must not swallow code: `[tok.apply_chat_template(p, ...) for p in prompts]` is Python."""
    r = run(
        "advise",
        "--model",
        str(tiny_model),
        "--gpu",
        "A100 80GB",
        "--concurrency",
        "32",
        "--input-len",
        "64",
        "--dtype",
        "bfloat16",
        env={"COLUMNS": "140"},
    )
    assert r.returncode == 0, r.stderr
    assert "inputs = [tok.apply_chat_template(p, add_generation_prompt=True) for p in prompts]" in r.stdout


def test_help_at_80_columns_shows_every_option_name_whole():
    import click
    import typer

    from infertune.cli import register
    from infertune.cli.app import app

    register()  # every command (`infertune` registers only the one it runs)
    group = typer.main.get_command(app)
    commands = [(name, c) for name, c in group.commands.items() if not isinstance(c, click.Group)]
    for name, command in commands:
        r = run(name, "--help", env={"COLUMNS": "80"})
        assert r.returncode == 0, r.stderr
        assert max(len(line) for line in r.stdout.splitlines()) <= 80, name
        for param in command.params:
            for opt in param.opts + param.secondary_opts:
                if opt.startswith("--"):
                    assert opt in r.stdout, (name, opt)


def test_estimate_text_prints_each_expected_figures_band(tiny_model):
    r = run("estimate", "--model", str(tiny_model), "--gpu", "A100 80GB", "--input-len", "512")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert "published rows of this kind (gpu/decode/dense)" in text and "(gpu/ttft/dense)" in text
    d = json.loads(run("estimate", "--model", str(tiny_model), "--gpu", "A100 80GB", "--format", "json").stdout)
    assert d["speed"]["band_tpot"]["kind"] == "gpu/decode/dense" and d["speed"]["band_tpot"]["rows"] > 0

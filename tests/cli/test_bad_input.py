"""Bad input across every command: exit 2, one line on stderr, no traceback, and no trial, server, load
test or model conversion started. The CLI runs in-process (the real `main`, its real error handling) with
each place real work starts made to raise `Started`: a refused input must never reach one."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


class Started(BaseException):  # not an Exception: nothing in the CLI may swallow it
    pass


def _stop(what):
    def raise_started(*_a, **_k):
        raise Started(what)

    return raise_started


@functools.cache
def _import_everything() -> None:
    """Every module imported unpatched, once: one that imported a door's name while it is patched (a module-level
    `from infertune.measure import run_trial`) would keep the stand-in for the rest of the session."""
    import importlib
    import pkgutil

    import infertune

    for info in pkgutil.walk_packages(infertune.__path__, "infertune."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)


@contextlib.contextmanager
def work_guarded():
    """Every door to real work (a trial, a tune loop, a server, a load test, a model conversion, a CPU probe)
    raises Started."""
    _import_everything()
    with contextlib.ExitStack() as stack:
        for target in (
            "infertune.measure.run_trial",
            "infertune.tuning.loop.run_trial",
            "infertune.api.run_tune",
            "infertune.api.runs.run_tune",
            "infertune.serving.trial.run_serve_trial",
            "infertune.serving.loadtest.loadtest",
            "infertune.models.store.prepare",
            "infertune.estimate.accelerators.probe_cpu",
        ):
            stack.enter_context(mock.patch(target, side_effect=_stop(target)))
        yield


def invoke(*args: str, env: dict | None = None, cwd: Path | None = None) -> tuple[str, int | None, str]:
    """('started', None, stderr) when work began, else ('exit', code, stderr). `cwd`: where default run
    folders would be created (never the repository)."""
    from infertune import cli

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(sys, "argv", ["infertune", *args]),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
        mock.patch.dict(os.environ, env or {}),
        work_guarded(),
        contextlib.chdir(cwd or Path.cwd()),
    ):
        try:
            cli.main()
        except Started:
            return "started", None, err.getvalue()
        except SystemExit as e:
            return "exit", e.code if isinstance(e.code, int) else (0 if e.code is None else 1), err.getvalue()
    return "exit", 0, err.getvalue()


@pytest.fixture(scope="module")
def places(tmp_path_factory, tiny_model):
    """Files and folders the bad inputs point at."""
    root = tmp_path_factory.mktemp("bad")
    (root / "a-file.txt").write_text("not a folder\n")
    (root / "empty").mkdir()
    (root / "syntax.py").write_text("def f(:\n")
    (root / "latin1.py").write_bytes(b"x = '\xe9t\xe9'\n")
    (root / "role.yaml").write_text("prompts:\n  - - role: robot\n      content: hi\n")
    (root / "zero.yaml").write_text("max_new_tokens: 0\n")
    (root / "extra.yaml").write_text("max_new_token: 8\n")
    (root / "run").mkdir()
    # a prepared demo model whose file no longer matches its checksum (same size, other bytes)
    home = root / "home"
    folder = home / "models" / "smollm2"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"x" * 64)
    (folder / "infertune-model.json").write_text(
        json.dumps({"name": "smollm2", "files": {"model.safetensors": {"size": 64, "sha256": "0" * 64}}})
    )
    return {"root": root, "tiny": str(tiny_model), "home": home}


# (command line, what the one line must say); {root} and {tiny} are filled in from `places`
CASES = [
    # report
    (["report", "{root}/a-file.txt"], "is a file, not a run folder"),
    (["report", "{root}/nope"], "no such run folder"),
    # measure: outputs, flags, run files, the model
    (["measure", "--model", "{tiny}", "--output", "{root}/empty"], "is a folder"),
    (["measure", "--model", "{tiny}", "--output", "{root}/a-file.txt/x.json"], "is a file, so nothing"),
    (["measure", "--model", "{tiny}", "--max-new-tokens", "0"], "--max-new-tokens 0: allowed 1 to"),
    (["measure", "--model", "{tiny}", "--max-new-tokens", "99999999999999999999999"], "nearest valid: 16,777,216"),
    (["measure", "--model", "{tiny}", "--batch", "0"], "--batch 0: allowed 1 to 65,536"),
    (["measure", "--model", "{tiny}", "--repeats", "0"], "--repeats 0"),
    (["measure", "--model", "{tiny}", "--warmup", "-1"], "--warmup -1"),
    (["measure", "--model", "{tiny}", "--seed", "-1"], "--seed -1"),
    (["measure", "--model", "{tiny}", "--timeout", "0"], "--timeout 0: allowed more than 0"),
    (["measure", "--model", "{tiny}", "--concurrency", "0"], "--concurrency 0"),
    (["measure", "--model", "{tiny}", "--tp", "0"], "--tp 0"),
    (["measure", "--model", "{tiny}", "--tp-plan", "diagonal"], "--tp-plan diagonal"),
    (["measure", "--model", "{tiny}", "--dtype", "float77"], "--dtype"),
    (["measure", "--model", "{tiny}", "--attn", "bogus"], "unknown attention implementation 'bogus'"),
    (["measure", "--model", "{tiny}", "--kv-cache", "huge"], "--kv-cache"),
    (["measure", "--model", "{tiny}", "--batching", "sometimes"], "--batching"),
    (["measure", "--model", "{tiny}", "--memory-limit", "lots"], "--memory-limit"),
    (["measure", "--model", "{tiny}", "--input-len", "10000000k"], "10,240,000,000 tokens"),
    (["measure", "--workload", "{root}/role.yaml", "--model", "{tiny}"], "'system', 'user' or 'assistant' (got robot)"),
    (["measure", "--workload", "{root}/zero.yaml", "--model", "{tiny}"], "field 'max_new_tokens' 0: allowed 1 to"),
    (["measure", "--workload", "{root}/extra.yaml", "--model", "{tiny}"], "max_new_token"),
    (["measure", "--model", "demo"], "fails its check"),
    (["measure", "--model", "{tiny}", "--device", "cuda:999"], "--device cuda:999"),
    (["measure", "--model", "{tiny}", "--device", "gpu0"], "unknown device 'gpu0'"),
    # tune
    (["tune", "--model", "{tiny}", "--output", "{root}/a-file.txt"], "is a file"),
    (["tune", "--model", "{tiny}", "--time-budget", "-10"], "--time-budget -10: allowed more than 0"),
    (["tune", "--model", "{tiny}", "--max-ttft", "-1"], "--max-ttft -1"),
    (["tune", "--model", "{tiny}", "--max-tpot", "0"], "--max-tpot 0"),
    (["tune", "--model", "{tiny}", "--trial-timeout", "0"], "--trial-timeout 0"),
    (["tune", "--model", "{tiny}", "--max-trials", "0"], "--max-trials 0"),
    (["tune", "--model", "{tiny}", "--objective", "speed"], "--objective speed"),
    (["tune", "--model", "{tiny}", "--min-quality", "2"], "--min-quality 2: allowed 0 to 1; nearest valid: 1"),
    (["tune", "--model", "{tiny}", "--max-kl", "-0.5"], "--max-kl -0.5"),
    (["tune", "--resume", "{root}/run", "--max-trials", "2"], "--max-trials would change it"),
    (["tune", "--resume", "{root}/run", "--objective", "memory"], "--objective would change it"),
    (["tune", "--model", "demo"], "fails its check"),
    # sweep
    (["sweep", "--model", "{tiny}", "--grid", "attn=sdpa,eager", "--objective", "speed"], "--objective speed"),
    (["sweep", "--model", "{tiny}", "--grid", "attn=sdpa,eager", "--trial-timeout", "0"], "--trial-timeout 0"),
    (["sweep", "--model", "{tiny}", "--grid", "attn=sdpa,eager", "--dtype", "float77"], "--dtype"),
    (["sweep", "--model", "{tiny}", "--grid", "attn=sdpa,eager", "--output", "{root}/a-file.txt"], "is a file"),
    (["sweep", "--model", "{tiny}", "--grid", "dtype=float32,bfloat16", "--cluster", "ray="], "--cluster must be"),
    # estimate
    (["estimate", "--model", "{tiny}", "--input-len", "10000000k"], "allowed 1 to 16,777,216 tokens"),
    (["estimate", "--model", "{tiny}", "--kv-nbits", "3"], "--kv-nbits 3"),
    (["estimate", "--model", "{tiny}", "--attn", "bogus"], "unknown attention implementation 'bogus'"),
    (["estimate", "--model", "{tiny}", "--max-new-tokens", "99999999999999999999999"], "--max-new-tokens"),
    (["estimate", "--model", "{tiny}", "--batch", "0"], "--batch 0"),
    (["estimate", "--model", "{tiny}", "--gpus", "0"], "--gpus 0"),
    (["estimate", "--model", "{tiny}", "--gpu", "nvidia a100"], "A100 40GB, A100 80GB"),
    (["estimate", "--model", "{tiny}", "--gpu", "H100"], "H100 PCIe, H100 SXM"),
    (["estimate", "--model", "{tiny}", "--dtype", "float77"], "--dtype float77"),
    (["estimate", "--model", "{tiny}", "--kv-residual-len", "-1"], "--kv-residual-len -1"),
    (["estimate", "--model", "{tiny}", "--max-cache-len", "0"], "--max-cache-len 0"),
    (["estimate", "--model", "{tiny}", "--prefill-chunk", "-4"], "--prefill-chunk -4"),
    (["estimate", "--model", "{tiny}", "--input-len", "1.5"], "not a whole number of tokens"),
    (["estimate", "--model", "{tiny}", "--cpu", "--max-memory", "0=1GiB"], "give --gpu NAME"),
    # advise
    (["advise", "--model", "{tiny}", "--gpu", "nvidia a100"], "A100 40GB, A100 80GB"),
    (["advise", "--model", "{tiny}", "--batch", "0"], "--batch 0"),
    (["advise", "--model", "{tiny}", "--concurrency", "0"], "--concurrency 0"),
    (["advise", "--model", "{tiny}", "--attn", "bogus"], "'bogus'"),
    (["advise", "--model", "{tiny}", "--input-len", "-5"], "--input-len -5"),
    (["advise", "--model", "{tiny}", "--vram", "lots"], "--vram"),
    (["advise", "--model", "{tiny}", "--cpu-ram", "lots"], "--cpu-ram"),
    (["advise", "--model", "{tiny}", "--kv-cache", "huge"], "--kv-cache huge"),
    # --tp with --batching continuous is a server that shards and batches (vLLM, TGI): accepted since #30's audit
    (["advise", "--model", "{tiny}", "--gpu", "A100 80GB", "--gpus", "2", "--tp", "3"], "--tp 3 needs as many GPUs"),
    (["advise", "{root}/zero.yaml", "--model", "{tiny}", "--gpu", "L4"], "field 'max_new_tokens' 0"),
    # what the user saw, and the target as stated (#30)
    (["advise", "--model", "{tiny}", "--gpu", "L4", "--observed", "speed=fast"], "unknown key 'speed'; keys: tpot"),
    (["advise", "--model", "{tiny}", "--gpu", "L4", "--observed", "tpot=220"], "say the unit"),
    (["advise", "--model", "{tiny}", "--gpu", "L4", "--observed", "tpot=slow"], "tpot=slow: cannot read it"),
    (["advise", "--model", "{tiny}", "--gpu", "L4", "--observed", "peak=0GiB"], "must be above zero"),
    (["advise", "--model", "{tiny}", "--gpu", "L4", "--observed", "tpot"], "expected KEY=VALUE"),
    (
        ["advise", "--model", "{tiny}", "--gpu", "L4", "--oom", "later"],
        "--oom later: the phase that ran out of memory takes load",
    ),
    (["advise", "--model", "{tiny}", "--cpu", "Xeon 9999"], "unknown CPU 'Xeon 9999'; closest:"),
    (["advise", "--model", "{tiny}", "--cpu", "EPYC"], "unknown CPU 'EPYC'"),
    (["advise", "--model", "{tiny}", "--cpu-flags", "avx1024"], "--cpu-flags: unknown flag 'avx1024'"),
    (["advise", "--model", "{tiny}", "--cpu-flags", "sse4_2,avx2,amx-bf61"], "--cpu-flags: unknown flag 'amx-bf61'"),
    (["advise", "--model", "{tiny}", "--gpu", "L4", "--cpu", "EPYC 9654"], "name two targets"),
    (["advise", "--model", "{tiny}", "--measured", "{root}/a-file.txt"], "not a measure result"),
    # doctor
    (["doctor", "{root}/empty"], "no Python files"),
    (["doctor", "{root}/syntax.py"], "syntax error"),
    (["doctor", "{root}/latin1.py"], "not a UTF-8 text file"),
    (["doctor", "{root}/missing.py"], "no such file or directory"),
    (["doctor", "{root}/syntax.py", "--gpu", "H100"], "H100 PCIe, H100 SXM"),
    (["doctor", "--env", "--model", "no-org/no-model-here"], "not in the local Hugging Face cache"),
    # serve-trial: refused before a server starts
    (["serve-trial", "--model", "{tiny}", "--dtype", "float77"], "--dtype float77"),
    (["serve-trial", "--model", "{tiny}", "--attn", "bogus"], "'bogus'"),
    (["serve-trial", "--model", "{tiny}", "--requests", "0"], "--requests 0"),
    (["serve-trial", "--model", "{tiny}", "--max-new-tokens", "0"], "--max-new-tokens 0"),
    (["serve-trial", "--model", "{tiny}", "--ready-timeout", "0"], "--ready-timeout 0"),
    (["serve-trial", "--model", "{tiny}", "--concurrency", "0"], "--concurrency 0"),
    (["serve-trial", "--model", "{tiny}", "--quantization", "int4"], "--quantization int4"),
    (["serve-trial", "--model", "{tiny}", "--cb-block-size", "32"], "--continuous-batching"),
    (["serve-trial", "--model", "{tiny}", "--output", "{root}/a-file.txt"], "is a file"),
    # loadtest: refused before a request is sent, naming the real problem
    (["loadtest", "--url", "http://127.0.0.1:9", "--duration", "-5"], "--duration -5"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--rate", "1", "--concurrency", "2"], "give one of them"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--requests", "0"], "--requests 0"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--timeout", "0"], "--timeout 0"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--rate", "-1"], "--rate -1"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--max-ttft", "-1"], "--max-ttft -1"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--endpoint", "embeddings"], "--endpoint embeddings"),
    (["loadtest", "--url", "ftp://127.0.0.1:9"], "not an http(s) URL"),
    (["loadtest", "--url", "http://127.0.0.1:9", "--output", "{root}/a-file.txt"], "is a file"),
    # models and profile
    (["models", "prepare", "gpt-17"], "unknown embedded model"),
    (["profile", "--model", "{root}/a-file.txt"], "is a file"),
]


@pytest.mark.parametrize("args, needle", CASES, ids=[" ".join(a[:3]) for a, _ in CASES])
def test_every_bad_input_is_one_line_exit_2_before_any_work(places, args, needle):
    filled = [a.format(root=places["root"], tiny=places["tiny"]) for a in args]
    kind, code, err = invoke(*filled, env={"INFERTUNE_HOME": str(places["home"])}, cwd=places["root"])
    assert kind == "exit", f"work started before refusing: {filled}"
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, (code, err)
    assert lines[0].startswith("error: ") and needle in lines[0], lines[0]


def test_an_unwritable_home_refuses_models_prepare(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    from infertune.models import store

    with (
        mock.patch.dict(os.environ, {"INFERTUNE_HOME": str(blocker / "home")}),
        pytest.raises(Exception, match="INFERTUNE_HOME: model folder .* is a file, so nothing can be created"),
    ):
        store.prepare("smollm2", install=False)


def test_a_fresh_home_says_it_is_preparing_the_demo_model(tmp_path, tiny_model):
    kind, _, err = invoke(
        "estimate", "--model", "demo", "--gpu", "L4", env={"INFERTUNE_HOME": str(tmp_path)}, cwd=tmp_path
    )
    assert kind == "started"  # the conversion is where work begins...
    assert "demo: preparing smollm2 for its first use" in err  # ...and it was announced first


# --- every command's flags, drawn at random ----------------------------------------------------------------

ABSURD = {"-3", "-1", "-10", "-0.5", "-5", "nan", "inf", "1e400", "99999999999999999999999", "10000000k"}
INTS = st.sampled_from(["-3", "-1", "0", "1", "2", "3", "7", "64", "70000", "99999999999999999999999"])
FLOATS = st.sampled_from(["-10", "-0.5", "0", "0.001", "0.5", "1", "2", "900", "nan", "inf", "1e400"])
TOKENS = st.sampled_from(["0", "-5", "1", "16", "1k", "1.5", "2k,4k", "10000000k", "lots", ""])
WORDS = st.sampled_from(
    [
        "bogus",
        "",
        "auto",
        "sdpa",
        "eager",
        "bfloat16",
        "float77",
        "latency",
        "memory",
        "static",
        "dynamic",
        "quantized",
        "serial",
        "continuous",
        "chat",
        "bnb-4bit",
        "L4",
        "nvidia a100",
        "H100",
        "1GiB",
        "lots",
        "0=1GiB",
        "int3",
    ]
)

FLAGS: dict[str, dict[str, st.SearchStrategy]] = {
    "estimate": {
        "--input-len": TOKENS,
        "--max-new-tokens": TOKENS,
        "--batch": INTS,
        "--concurrency": INTS,
        "--gpus": INTS,
        "--kv-nbits": INTS,
        "--kv-residual-len": INTS,
        "--max-cache-len": TOKENS,
        "--prefill-chunk": TOKENS,
        "--attn": WORDS,
        "--dtype": WORDS,
        "--kv-cache": WORDS,
        "--gpu": WORDS,
        "--quantization": WORDS,
        "--max-memory": WORDS,
    },
    "advise": {
        "--input-len": TOKENS,
        "--max-new-tokens": TOKENS,
        "--batch": INTS,
        "--concurrency": INTS,
        "--gpus": INTS,
        "--gpu": WORDS,
        "--dtype": WORDS,
        "--attn": WORDS,
        "--kv-cache": WORDS,
        "--batching": WORDS,
        "--quantization": WORDS,
        "--vram": WORDS,
    },
    "measure": {
        "--max-new-tokens": INTS,
        "--input-len": TOKENS,
        "--batch": INTS,
        "--repeats": INTS,
        "--warmup": INTS,
        "--seed": INTS,
        "--concurrency": INTS,
        "--timeout": FLOATS,
        "--tp": INTS,
        "--dtype": WORDS,
        "--attn": WORDS,
        "--kv-cache": WORDS,
        "--batching": WORDS,
        "--memory-limit": WORDS,
        "--max-batch-tokens": INTS,
    },
    "tune": {
        "--max-new-tokens": INTS,
        "--batch": INTS,
        "--max-trials": INTS,
        "--time-budget": FLOATS,
        "--max-ttft": FLOATS,
        "--max-tpot": FLOATS,
        "--min-quality": FLOATS,
        "--max-kl": FLOATS,
        "--trial-timeout": FLOATS,
        "--objective": WORDS,
        "--dtype": WORDS,
        "--attn": WORDS,
        "--max-memory": WORDS,
    },
    "loadtest": {
        "--duration": FLOATS,
        "--requests": INTS,
        "--max-new-tokens": INTS,
        "--timeout": FLOATS,
        "--max-ttft": FLOATS,
        "--concurrency": INTS,
        "--rate": FLOATS,
        "--endpoint": WORDS,
    },
    "serve-trial": {
        "--dtype": WORDS,
        "--attn": WORDS,
        "--requests": INTS,
        "--max-new-tokens": INTS,
        "--concurrency": INTS,
        "--ready-timeout": FLOATS,
        "--quantization": WORDS,
        "--cb-block-size": INTS,
    },
    "doctor": {"--gpu": WORDS},
}
BASE = {
    "estimate": ["--gpu", "L4"],
    "advise": ["--gpu", "L4", "--no-input"],
    "loadtest": ["--url", "http://127.0.0.1:9"],
    "doctor": ["{syntax}"],
}


@st.composite
def command_lines(draw):
    command = draw(st.sampled_from(sorted(FLAGS)))
    names = draw(st.lists(st.sampled_from(sorted(FLAGS[command])), min_size=1, max_size=3, unique=True))
    args = [x for n in names for x in (n, draw(FLAGS[command][n]))]
    return command, args


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(line=command_lines())
def test_any_flags_exit_0_or_2_never_a_traceback_never_work_on_a_refusal(places, line):
    command, args = line
    base = [a.format(syntax=places["root"] / "syntax.py") for a in BASE.get(command, [])]
    model = ["--model", places["tiny"]] if command not in ("loadtest", "doctor") else []
    kind, code, err = invoke(
        command, *model, *base, *args, env={"INFERTUNE_HOME": str(places["home"])}, cwd=places["root"]
    )
    assert "Traceback" not in err and "internal error" not in err, err
    if kind == "exit":
        assert code in (0, 2), (code, err)
        if code == 2:
            assert len(err.strip().splitlines()) == 1, err
    # every numeric input here is a count, a length, a duration or a share: a negative, non-finite or
    # astronomically large value is never meaningful, so it is refused, whatever else the line holds
    if any(v in ABSURD for v in args[1::2]):
        assert (kind, code) == ("exit", 2), (args, kind, err)

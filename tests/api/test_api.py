"""docs/api.md's examples run as written (on the embedded model), and the API returns what the CLI prints."""

import contextlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import infertune
from infertune.core.errors import UserError
from tests.serving import test_loadtest
from tests.serving.test_loadtest import FakeOpenAI

API_MD = Path(__file__).parents[2] / "docs" / "api.md"
EXAMPLES = [b for b in re.findall(r"```python\n(.*?)```", API_MD.read_text(), re.S) if "import infertune" in b]


def test_there_are_examples_for_every_verb_but_env():
    text = "".join(EXAMPLES)
    for verb in ("estimate", "advise", "measure", "doctor", "tune", "report", "serve_trial", "engines"):
        assert f"infertune.{verb}(" in text


@pytest.mark.parametrize("code", EXAMPLES, ids=[re.search(r"infertune\.(\w+)\(", c).group(1) for c in EXAMPLES])
def test_doc_example_runs(code, demo_model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(API_MD), "exec"), {"__name__": "__doc_example__"})


def test_verbs_are_callable_modules_and_the_cli_prints_the_same_json(tiny_model):
    from infertune.estimate import Estimate  # the subpackage still imports as one

    e = infertune.estimate(model=str(tiny_model), input_len=256, cpu=True)
    assert isinstance(e, Estimate) and e.schema_version == "1"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "infertune",
            "estimate",
            "--model",
            str(tiny_model),
            "--input-len",
            "256",
            "--cpu",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    cli = json.loads(r.stdout)
    assert cli["memory"] == e.model_dump(mode="json")["memory"] and cli["kind"] == "estimate"
    sweep = infertune.estimate(model=str(tiny_model), input_len="256,1k", cpu=True)
    assert [x.settings.input_len for x in sweep.sweep] == [256, 1024]
    with pytest.raises(UserError, match="--dtype int3: takes auto"):
        infertune.estimate(model=str(tiny_model), dtype="int3")
    assert infertune.env().kind == "env"


# --- the serving verbs: loadtest, serve_trial, engines ---------------------------------------------------------

# the fake OpenAI-compatible server of the load generator's tests: streams SSE from 127.0.0.1, counts the
# completions it is sent (its fixture, reused here)
server = test_loadtest.server

SERVING = ("loadtest", "serve_trial", "engines")
# (verb, arguments, what the one line says); "{server}" is the live fake server: nothing may reach it
SERVING_REFUSALS = [
    ("loadtest", {"url": "ftp://127.0.0.1:9"}, "--url: not an http(s) URL: 'ftp://127.0.0.1:9'"),
    ("loadtest", {"url": "http://127.0.0.1:99999"}, "--url: not an http(s) URL"),
    ("loadtest", {"url": "{server}", "concurrency": 0}, "--concurrency 0: allowed 1 to 65,536"),
    ("loadtest", {"url": "{server}", "concurrency": "1,x"}, "--concurrency: not a list of integers: '1,x'"),
    ("loadtest", {"url": "{server}", "rate": "0"}, "--rate 0: give request rates above 0"),
    ("loadtest", {"url": "{server}", "rate": 1, "concurrency": 2}, "give one of them"),
    ("loadtest", {"url": "{server}", "endpoint": "embeddings"}, "--endpoint embeddings: takes chat or completions"),
    ("loadtest", {"url": "{server}", "requests": 0}, "--requests 0: allowed 1 to"),
    ("serve_trial", {"engine": "tgi"}, "unknown engine 'tgi'; known: transformers, vllm, sglang"),
    ("serve_trial", {"concurrency": 0}, "--concurrency 0: allowed 1 to 65,536"),
    ("serve_trial", {"tp": 0}, "--tp 0: allowed 1 to"),
    ("serve_trial", {"max_model_len": 8}, "--max-model-len 8: allowed 16 to"),
    ("serve_trial", {"cb_block_size": 32}, "--cb-* options need --continuous-batching"),
    ("serve_trial", {"dtype": "float77"}, "--dtype float77"),
    ("engines", {"engine": "tgi"}, "--engine tgi: takes vllm or sglang"),
]


def serving_refusal_message(verb, args, url):
    """What the API raises for `args`, with every door to work (a load test, a server, a model lookup, an
    install) made to fail the test instead."""
    from unittest import mock

    from infertune import api

    doors = [
        "infertune.serving.loadtest.loadtest",
        "infertune.serving.trial.run_serve_trial",
        "infertune.serving.server.ServeProcess.__enter__",
        "infertune.models.store.resolve",
        "infertune.serving.engines.install",
    ]
    with contextlib.ExitStack() as stack:
        for door in doors:
            stack.enter_context(mock.patch(door, side_effect=AssertionError(f"work started: {door}")))
        with pytest.raises(UserError) as refused:
            getattr(api, verb)(**{k: v.format(server=url) if isinstance(v, str) else v for k, v in args.items()})
    return str(refused.value)


def test_the_api_and_the_docs_have_the_serving_verbs():
    from infertune import api

    table = API_MD.read_text()
    for verb in SERVING:
        assert verb in api.__all__ and getattr(infertune, verb) is getattr(api, verb)
        assert f"| `infertune.{verb}(" in table


@pytest.mark.parametrize(
    "verb, args, needle", SERVING_REFUSALS, ids=[f"{v}-{'-'.join(a)}" for v, a, _ in SERVING_REFUSALS]
)
def test_serving_verbs_refuse_bad_input_in_one_line_before_any_work(server, verb, args, needle):
    message = serving_refusal_message(verb, args, server)
    assert needle in message and "\n" not in message, message
    assert FakeOpenAI.calls == 0  # not one request reached the server


def test_engines_are_this_hosts_records_as_the_cli_prints_them():
    from infertune.serving import engines as managed

    listed = infertune.engines()
    assert [e.name for e in listed] == list(managed.ENGINES) == ["vllm", "sglang"]
    assert listed == managed.installed() and infertune.engines(engine="vllm") == [managed.info("vllm")]
    for e in listed:  # installed or not, each says where it lives and how to (re)install it
        assert e.install == f"infertune engines install {e.name}" and e.path == str(managed.folder(e.name))
        assert not e.ok or (e.version is not None and managed.python(e.name).exists())
    r = subprocess.run(
        [sys.executable, "-m", "infertune", "engines", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [e.model_dump(mode="json") for e in listed]


def test_loadtest_sends_load_to_the_given_server_only_and_reports_it(server, tmp_path):
    from infertune.serving.loadtest import LoadTestResult

    events, said = [], []
    res = infertune.loadtest(
        server,
        model="fake",
        concurrency="1,2",
        requests=4,
        max_new_tokens=4,
        max_ttft=5.0,
        output=tmp_path / "load",
        on_event=events.append,
        say=said.append,
    )
    assert isinstance(res, LoadTestResult) and res.kind == "measured" and res.url == server
    assert [lv.concurrency for lv in res.levels] == [1, 2] and res.knee_concurrency == 2
    assert all(lv.requests_ok == 4 and lv.requests_failed == 0 and lv.ttft_s.p50 > 0 for lv in res.levels)
    assert FakeOpenAI.calls == 8  # every request of both levels went to the server it was given
    assert [(e["event"], e["index"], e["total"]) for e in events] == [("level", 1, 2), ("level", 2, 2)]
    assert (
        said[0].startswith("concurrency 1: 4 ok, 0 failed, ")
        and said[-1] == f"report: {tmp_path / 'load' / 'load.html'}"
    )
    assert json.loads((tmp_path / "load" / "load.json").read_text())["levels"] == res.model_dump(mode="json")["levels"]
    rates = infertune.loadtest(server, rate=[20, 40], requests=3, max_new_tokens=2)  # open loop: a list of rates
    assert [lv.rate for lv in rates.levels] == [20.0, 40.0] and FakeOpenAI.calls == 14

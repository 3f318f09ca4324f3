"""`infertune mcp` driven by the official SDK's own client over stdio, as an assistant would."""

import asyncio
import json
import os
import sys

import jsonschema
import pytest

from infertune.cli import schema
from tests.api.test_api import SERVING_REFUSALS, serving_refusal_message
from tests.serving import test_loadtest
from tests.serving.test_loadtest import FakeOpenAI

server = test_loadtest.server  # the fake OpenAI-compatible server on 127.0.0.1 the load generator's tests run

pytest.importorskip("mcp")


def _with_session(body, tiny_model):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def main():
        # the whole environment: the SDK passes only a safe subset by default, which drops PYTHONPATH, and the
        # server would then run whatever infertune is installed rather than the code under test
        params = StdioServerParameters(command=sys.executable, args=["-m", "infertune", "mcp"], env=dict(os.environ))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)

    return asyncio.run(asyncio.wait_for(main(), timeout=300))


def test_tools_estimate_advise_and_errors_over_stdio(tiny_model):
    schemas = schema.schemas()

    async def body(session):
        names = {t.name for t in (await session.list_tools()).tools}
        est = await session.call_tool("estimate", {"model": str(tiny_model), "input_len": "1k", "cpu": True})
        adv = await session.call_tool("advise", {"model": str(tiny_model), "input_len": 512, "concurrency": 4})
        bad = await session.call_tool("estimate", {"model": str(tiny_model), "dtype": "int3"})
        wrong_type = await session.call_tool("estimate", {"model": str(tiny_model), "batch": "many"})
        # the same validation layer as the CLI's: ranges, ambiguous names, flags that would change a resumed run
        refused = [
            await session.call_tool(tool, args)
            for tool, args in (
                ("estimate", {"model": str(tiny_model), "kv_nbits": 3}),
                ("advise", {"model": str(tiny_model), "gpu": "nvidia a100"}),
                ("tune", {"resume": "tests/data", "max_trials": 2}),
                ("tune", {"model": str(tiny_model), "time_budget": -10}),
                ("tune", {"model": str(tiny_model), "cluster": "dask"}),
                ("sweep", {"models": [str(tiny_model)], "grid": ["colour=red,blue"]}),
            )
        ]
        after = await session.call_tool("doctor", {"paths": ["tests/data/doctor/good.py"]})
        return names, est, adv, bad, wrong_type, refused, after

    names, est, adv, bad, wrong_type, refused, after = _with_session(body, tiny_model)
    assert names == {
        "env",
        "estimate",
        "advise",
        "measure",
        "tune",
        "sweep",
        "doctor",
        "report",
        "loadtest",
        "serve_trial",
        "engines",
    }
    e = json.loads(est.content[0].text)
    assert not est.is_error and e["kind"] == "estimate" and e["schema_version"] == schema.SCHEMA_VERSION
    jsonschema.validate(e, schemas["estimate"])
    a = json.loads(adv.content[0].text)
    assert not adv.is_error and a["kind"] == "advice"
    jsonschema.validate(a, schemas["advice"])
    # bad input: a tool error with the CLI's one-line message, and the server keeps serving
    assert bad.is_error and "--dtype int3: takes auto" in bad.content[0].text and "\n" not in bad.content[0].text
    assert wrong_type.is_error
    said = [r.content[0].text for r in refused]
    assert all(r.is_error for r in refused) and not any("\n" in x for x in said)
    for text, needle in zip(
        said,
        (
            "--kv-nbits 3",
            "A100 40GB, A100 80GB",
            "--max-trials would change it",
            "--time-budget -10: allowed more than 0",
            "--cluster must be 'ray' or 'ray=ADDRESS' (got 'dask')",
            "--grid colour: not a knob",
        ),
        strict=True,
    ):
        assert needle in text, text
    d = json.loads(after.content[0].text)
    assert not after.is_error and d["kind"] == "doctor" and d["findings"] == []


def test_serving_tools_over_stdio_load_only_the_given_url_and_refuse_as_the_api_does(server):
    from infertune import api

    def args_for(args):
        return {k: v.format(server=server) if isinstance(v, str) else v for k, v in args.items()}

    progress = []

    async def body(session):
        async def on_progress(p, total, message):
            progress.append(message)

        tools = {t.name: t for t in (await session.list_tools()).tools}
        load = await session.call_tool(
            "loadtest",
            {"url": server, "concurrency": "1,2", "requests": 3, "max_new_tokens": 4, "max_ttft": 5},
            progress_callback=on_progress,
        )
        sent = FakeOpenAI.calls
        refused = [await session.call_tool(verb, args_for(args)) for verb, args, _ in SERVING_REFUSALS]
        listed = await session.call_tool("engines", {})
        one = await session.call_tool("engines", {"engine": "sglang"})
        return tools, load, sent, refused, listed, one

    tools, load, sent, refused, listed, one = _with_session(body, None)
    assert {"loadtest", "serve_trial", "engines"} <= set(tools)
    assert "host" not in tools["serve_trial"].input_schema["properties"]  # a server it starts binds loopback only
    assert {"url", "concurrency", "rate", "max_ttft"} <= set(tools["loadtest"].input_schema["properties"])
    d = json.loads(load.content[0].text)
    assert not load.is_error and d["kind"] == "measured" and d["test"] == "loadtest" and d["url"] == server
    jsonschema.validate(d, schema.schemas()["loadtest"])
    assert [lv["requests_ok"] for lv in d["levels"]] == [3, 3] and d["knee_concurrency"] == 2
    assert sent == 6 and FakeOpenAI.calls == 6  # the load went to that server, and no refused call sent any
    assert any((m or "").startswith("concurrency 2: 3 ok") for m in progress)
    for r, (verb, args, needle) in zip(refused, SERVING_REFUSALS, strict=True):
        text = r.content[0].text
        assert r.is_error and needle in text and "\n" not in text, (verb, args, text)
        # the API's own line, word for word, after the SDK's "Error executing tool NAME: "
        assert text == f"Error executing tool {verb}: {serving_refusal_message(verb, args, server)}"
    assert not listed.is_error and json.loads(listed.content[0].text) == [
        e.model_dump(mode="json") for e in api.engines()
    ]
    assert json.loads(one.content[0].text) == [api.engines(engine="sglang")[0].model_dump(mode="json")]


def test_measure_reports_progress(tiny_model):
    progress = []

    async def body(session):
        async def on_progress(p, total, message):
            progress.append(message)

        return await session.call_tool(
            "measure", {"model": str(tiny_model), "max_new_tokens": 3, "warmup": 0}, progress_callback=on_progress
        )

    r = _with_session(body, tiny_model)
    m = json.loads(r.content[0].text)
    assert not r.is_error and m["kind"] == "measured" and m["status"] == "ok"
    jsonschema.validate(m, schema.schemas()["measurement"])
    assert any("generate" in (x or "") for x in progress)


def test_published_schemas_are_current():
    """docs/schema/ is what `python -m infertune.cli.schema` writes from the models today."""
    from pathlib import Path

    folder = Path(__file__).parents[2] / "docs" / "schema"
    for name, s in schema.schemas().items():
        published = json.loads((folder / f"{name}.json").read_text())
        assert published == json.loads(json.dumps(s, sort_keys=True)), (
            f"stale docs/schema/{name}.json: rerun python -m infertune.cli.schema"
        )


def test_advise_takes_what_the_user_saw_and_a_cpu_target_over_stdio(tiny_model):
    async def body(session):
        seen = await session.call_tool(
            "advise", {"model": str(tiny_model), "gpu": "L4", "observed": ["tpot=2s"], "oom": "decode"}
        )
        as_dict = await session.call_tool("advise", {"model": str(tiny_model), "gpu": "L4", "observed": {"tpot": "2s"}})
        cpu = await session.call_tool("advise", {"model": str(tiny_model), "cpu": "EPYC 9654", "cpu_ram": "64GiB"})
        bad = await session.call_tool("advise", {"model": str(tiny_model), "gpu": "L4", "observed": ["speed=fast"]})
        return seen, as_dict, cpu, bad

    seen, as_dict, cpu, bad = _with_session(body, tiny_model)
    a = json.loads(seen.content[0].text)
    assert (
        a["diagnosis"]["evidence"]["observed_oom"] == "decode" and a["diagnosis"]["ranked"][0]["severity"] == "blocking"
    )
    assert json.loads(as_dict.content[0].text)["diagnosis"]["evidence"]["observed_tpot_s"] == 2.0
    c = json.loads(cpu.content[0].text)
    assert c["hardware"]["accelerator"] == "EPYC 9654" and c["hardware"]["memory_bytes"] == 64 * 2**30
    assert bad.is_error and "unknown key 'speed'" in bad.content[0].text

"""`infertune mcp` driven by the official SDK's own client over stdio, as an assistant would."""

import asyncio
import json
import os
import sys

import jsonschema
import pytest

from infertune.cli import schema

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
            )
        ]
        after = await session.call_tool("doctor", {"paths": ["tests/data/doctor/good.py"]})
        return names, est, adv, bad, wrong_type, refused, after

    names, est, adv, bad, wrong_type, refused, after = _with_session(body, tiny_model)
    assert names == {"env", "estimate", "advise", "measure", "tune", "doctor", "report"}
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
        ),
        strict=True,
    ):
        assert needle in text, text
    d = json.loads(after.content[0].text)
    assert not after.is_error and d["kind"] == "doctor" and d["findings"] == []


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

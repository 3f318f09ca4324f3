"""`infertune mcp`: the verbs of `infertune.api` as Model Context Protocol tools over stdio.

Each tool's arguments are the CLI's long flags in snake_case, generated from the API function's own
signature (so the three interfaces cannot drift); its text result is the JSON object the CLI prints with
`--format json`. Bad input comes back as a tool error carrying the one-line message, and the server keeps
serving. Long tools (measure, tune, loadtest, serve_trial) run in a worker thread and report progress as they
go. `loadtest` sends load to the URL it is given and nowhere else; `serve_trial` starts its server on loopback
only (its `host` is not a tool argument), and stops the server's whole process tree when the trial ends.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import types
import typing
from collections.abc import Callable
from typing import Any

HIDDEN = {"say", "on_event", "ask"}  # callbacks: the server supplies them


def _progress(ctx, total: float | None, token):
    """An on_event for the API that forwards trial and generation progress to the client. Events come
    from the trial runner's own threads: `token` is the server's event loop, to send from any of them."""
    import anyio

    state = {"n": 0.0}

    def on_event(e: dict[str, Any]) -> None:
        msg = None
        if e.get("event") == "trial":
            state["n"], msg = float(e["index"]), f"trial {e['index']}: {e['setup'].dtype}, {e['setup'].attn}"
        elif e.get("event") == "progress":
            msg = f"generate {e['done']}/{e['total']}"
            if total is None:
                state["n"] = e["done"] / max(e["total"], 1)
        elif e.get("event") in ("phase", "serve"):
            msg = e.get("phase") or f"serving {' '.join(e.get('flags', []))}"
        elif e.get("event") == "level":
            lv = e["level"]
            msg = f"concurrency {lv.concurrency}: {lv.requests_ok} ok, {lv.output_tokens_per_s:,.1f} tok/s"
            if total is None:
                state["n"] = e["index"] / max(e["total"], 1)
        if msg is not None:
            with contextlib.suppress(Exception):  # progress is a courtesy: a lost notification never fails the tool
                anyio.from_thread.run(
                    ctx.report_progress, state["n"], total if total is not None else 1.0, msg, token=token
                )

    return on_event


def _as_json(result: Any) -> str:
    """The JSON the CLI prints with `--format json`: a model, a list of models (engines) or a dict (report)."""
    if hasattr(result, "model_dump_json"):
        return result.model_dump_json(indent=2)
    return json.dumps(
        result, indent=2, default=lambda o: o.model_dump(mode="json") if hasattr(o, "model_dump") else str(o)
    )


def tool_for(
    fn: Callable[..., Any],
    name: str,
    *,
    extra: list[inspect.Parameter] | None = None,
    call: Callable[..., Any] | None = None,
    long: bool = False,
    total_arg: str | None = None,
    hidden: frozenset[str] = frozenset(),
):
    """An async MCP tool with `fn`'s parameters (callbacks and `hidden` removed: `fn`'s defaults hold; `extra`
    added) that runs `call` (default `fn`) in a worker thread and returns its JSON."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    from infertune.core.errors import UserError

    # the parameters' types only: the tool returns JSON text, and a verb's return type may be imported for type
    # checking alone (api.runs.measure's Measurement, kept off the import path of the verbs that do not need it)
    params_only = types.SimpleNamespace(__annotations__={k: v for k, v in fn.__annotations__.items() if k != "return"})
    hints = typing.get_type_hints(params_only, globalns=fn.__globals__)
    params = [
        p.replace(annotation=hints.get(p.name, Any))
        for p in inspect.signature(fn).parameters.values()
        if p.name not in HIDDEN | hidden and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
    ]
    params = [p.replace(kind=p.KEYWORD_ONLY) for p in params + (extra or [])]
    target = call or fn

    async def tool(ctx: Context, **kwargs: Any) -> str:
        import anyio
        import anyio.lowlevel

        if long:
            total = kwargs.get(total_arg) if total_arg else None
            kwargs["on_event"] = _progress(ctx, float(total) if total else None, anyio.lowlevel.current_token())
        try:
            result = await anyio.to_thread.run_sync(lambda: target(**kwargs))
        except UserError as e:
            raise ToolError(str(e)) from None
        except Exception as e:
            raise ToolError(f"internal error: {type(e).__name__}: {e}") from None
        return _as_json(result)

    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    # inspect.signature (and so the SDK's argument schema) reads __signature__, which typeshed does not declare
    tool.__signature__ = inspect.Signature([*params, ctx_param], return_annotation=str)  # type: ignore[attr-defined]
    tool.__annotations__ = {**{p.name: p.annotation for p in params}, "ctx": Context, "return": str}
    tool.__name__ = name
    tool.__doc__ = inspect.getdoc(fn)
    return tool


def server():
    from mcp.server.mcpserver import MCPServer

    from infertune import __version__, api
    from infertune.api.sweeps import sweep_spec

    srv = MCPServer(
        "infertune",
        version=__version__,
        instructions=(
            "Pick, prove and ship inference optimizations for Hugging Face Transformers. estimate and advise "
            "answer from config.json (estimates); measure and tune run trials on this machine (measured); "
            "sweep measures every configuration of a grid (side by side on a Ray cluster with `cluster`); "
            "loadtest measures an OpenAI-compatible server at a given URL, serve_trial starts one on loopback "
            "and load-tests it, engines lists the serving engines installed here."
        ),
    )
    tune_extra = [
        inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=str | None)
        for n in ("output", "resume", "cluster")  # cluster: ray or ray=ADDRESS (measure/cluster.py)
    ]
    for name, fn, options in (
        ("env", api.env, {}),
        ("estimate", api.estimate, {}),
        ("advise", api.advise, {}),
        ("measure", api.measure, {"long": True}),
        (
            "tune",
            api.tune_spec,
            {
                "long": True,
                "total_arg": "max_trials",
                "extra": tune_extra,
                "call": lambda output=None, resume=None, cluster=None, **a: api.tune(
                    output=output, resume=resume, cluster=cluster, **a
                ),
            },
        ),
        (
            "sweep",
            sweep_spec,
            {
                "long": True,
                "extra": tune_extra,
                "call": lambda output=None, resume=None, cluster=None, **a: api.sweep(
                    output=output, resume=resume, cluster=cluster, **a
                ),
            },
        ),
        ("doctor", api.doctor, {}),
        ("report", api.report, {}),
        ("loadtest", api.loadtest, {"long": True}),
        ("serve_trial", api.serve_trial, {"long": True, "hidden": frozenset({"host"})}),  # binds loopback only
        ("engines", api.engines, {}),
    ):
        srv.add_tool(
            tool_for(fn, name, **options),
            name=name,
            description=(inspect.getdoc(fn) or "").split("\n\n")[0],
            structured_output=False,
        )
    return srv


def main() -> None:
    server().run("stdio")

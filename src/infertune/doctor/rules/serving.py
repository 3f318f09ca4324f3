"""Serving rules: streaming, web handlers, the event loop."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, dotted, has_star_kwargs, id_name, kw, method, pipeline_model, receiver
from infertune.doctor.rules.completions import completion_demo
from infertune.doctor.rules.context import CPU_SIZED, TIMERS, params_in_id
from infertune.doctor.rules.handlers import OFFLOAD, generation_in, helper_generation, offloaded
from infertune.doctor.rules.placement import stays_on_cpu
from infertune.doctor.rules.prompts import BASE_LM
from infertune.doctor.script import Script

HANDLER_DECORATORS = {"get", "post", "put", "route", "api_route", "websocket", "patch"}
STREAMERS = ("TextIteratorStreamer", "TextStreamer", "AsyncTextIteratorStreamer")


def _thread_targets(s: Script) -> set[str]:
    out = set()
    for c in s.calls:
        if callee(c) in OFFLOAD:
            for a in [kw(c, "target"), *c.args]:
                if a is not None:
                    out.add(dotted(a).split(".")[-1])
    return out - {""}


def _text_streamer(s: Script, value: ast.AST | None) -> bool:
    """A TextIteratorStreamer, where the value comes from."""
    return value is not None and any(
        isinstance(o, ast.Call) and callee(o) == "TextIteratorStreamer" for o in s.origins(value)
    )


def streamer_same_thread(s: Script):
    targets = _thread_targets(s)
    for c in s.generates:
        if not _text_streamer(s, kw(c, "streamer")):
            continue
        fn = s.enclosing_function(c)
        if (fn is not None and fn.name in targets) or offloaded(s, c):
            continue
        yield (
            c,
            (
                "generate with a TextIteratorStreamer in the thread that reads it: nothing streams until "
                "generation ends (and a streamer timeout raises)"
            ),
        )


def streamer_skip_prompt(s: Script):
    if s.encoder_decoder():
        return
    for c in s.calls:
        if callee(c) not in STREAMERS or has_star_kwargs(c) or completion_demo(s, c):
            continue  # (a base model continuing text: its prompt streamed first is the demo's output, as IT004's)
        sp = kw(c, "skip_prompt")
        if sp is not None and const(sp) is not False:
            continue
        parent = s.parents.get(c)
        names = {dotted(t) for t in parent.targets} if isinstance(parent, ast.Assign) else set()
        fed = any(
            (isinstance(n, ast.keyword) and n.arg == "streamer" and (n.value is c or dotted(n.value) in names))
            or (
                isinstance(n, ast.Dict)
                and any(const(k) == "streamer" and dotted(v) in names for k, v in zip(n.keys, n.values, strict=True))
            )
            for n in s.nodes
        )
        if fed:
            yield c, f"{callee(c)} without skip_prompt=True: the prompt is streamed back before the answer"


def is_route(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in HANDLER_DECORATORS
        for d in fn.decorator_list
    )


# class-based views: Flask-RESTful's Resource, Flask's MethodView, Starlette's HTTPEndpoint, whose HTTP-verb methods
# are the handlers (doctor-real-9 k06: a Resource whose post() builds a summarization pipeline per request)
VIEW_BASES = {"Resource", "MethodView", "HTTPEndpoint"}
HTTP_VERBS = {"get", "post", "put", "delete", "patch"}


def routes(s: Script):
    for fns in s.functions.values():
        yield from (fn for fn in fns if is_route(fn))
    for n in s.nodes:
        if isinstance(n, ast.ClassDef) and any(dotted(b).split(".")[-1] in VIEW_BASES for b in n.bases):
            yield from (
                f for f in n.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef) and f.name in HTTP_VERBS
            )


def _times_itself(s: Script, fn: ast.AST) -> bool:
    """A route that clocks its own generate: a benchmark harness driven by one client, not a shared service."""
    return any(isinstance(c, ast.Call) and dotted(c.func) in TIMERS for c in ast.walk(fn))


def _cpu_only(s: Script) -> bool:
    """Every model stays on the CPU: loads never placed on an accelerator, pipelines with no device (or -1/"cpu").
    Either the author chose the CPU for a toy service (a small model: batching its requests would buy nothing) or
    the CPU placement is the problem to fix first (IT002's: doctor-real-3 e33, a 70B in fp32 behind Flask)."""
    if not (s.loads or s.pipelines):
        return False
    return all(stays_on_cpu(s, c) for c in s.loads) and all(_cpu_pipeline(s, p) for p in s.pipelines)


def _cpu_pipeline(s: Script, p: ast.Call) -> bool:
    """A pipeline left on the CPU: no device_map, no device (or device=-1/"cpu"), no model placed elsewhere."""
    device = kw(p, "device")
    if kw(p, "device_map") is not None or (device is not None and const(device) not in (-1, "cpu")):
        return False
    m = pipeline_model(p)
    loads = s.models_of(m) if m is not None else []
    return all(stays_on_cpu(s, c) for c in loads)


def _small_models(s: Script) -> bool:
    """Every model's id names under 2B parameters (TinyLlama-1.1B, Qwen2.5-0.5B) or is a small base model (gpt2):
    a sync route around one is a demo, not a serving design (doctor-real-4 f12, doctor-real-3 e05/e07, doctor-real-1
    b01/b09/b11, all labelled so; the problems labelled were 3B and up, or of no size the id names)."""
    ids = s.weight_ids()
    return bool(ids) and all(
        i is not None and (BASE_LM.search(id_name(i)) or ((n := params_in_id(i)) is not None and n < CPU_SIZED))
        for i in ids
    )


def _local_dev_server(s: Script) -> bool:
    """The file starts its own server (`app.run(...)`, `uvicorn.run(...)`) on the loopback only (no host, or
    127.0.0.1/localhost) or as Flask's debug server: one user on one machine (doctor-real-4 f18, f19; the problems
    labelled bound 0.0.0.0 or ran under a server started elsewhere)."""
    runs = [
        c
        for c in s.calls
        if dotted(c.func) == "uvicorn.run"
        or (
            method(c) == "run"
            and any(isinstance(o, ast.Call) and callee(o) in ("Flask", "FastAPI") for o in s.origins(receiver(c)))
        )
    ]
    return bool(runs) and all(
        const(kw(c, "debug")) is True or const(kw(c, "host") or ast.Constant("127.0.0.1")) in ("127.0.0.1", "localhost")
        for c in runs
    )


def generate_in_handler(s: Script):
    if _cpu_only(s) or _small_models(s) or _local_dev_server(s):
        return  # a CPU toy service, a CPU placement to fix first (IT002), a demo-sized model, a local dev server
    for fn in routes(s):
        if _times_itself(s, fn) or (isinstance(fn, ast.AsyncFunctionDef) and _blocking(s, fn)):
            continue  # a benchmark harness; or an async route that blocks its loop, IT022's one finding
        direct = generation_in(s, fn)
        if direct:
            yield (
                direct[0],
                (f"web handler `{fn.name}` calls generate per request: concurrent requests run one after another"),
            )
            continue
        via = helper_generation(s, fn)
        if via:
            call, _, _ = via[0]
            yield (
                call,
                (
                    f"web handler `{fn.name}` runs generate per request through `{callee(call)}` (a thread per "
                    "request still shares one model): concurrent requests run one after another"
                ),
            )


def _entry_points(s: Script) -> set[str]:
    """async functions run once as the program (asyncio.run(main())): nothing else waits on their loop."""
    return {"main"} | {
        callee(c.args[0])
        for c in s.calls
        if callee(c) in ("run", "run_until_complete") and c.args and isinstance(c.args[0], ast.Call)
    }


def _blocking(s: Script, fn: ast.AsyncFunctionDef) -> list[tuple[ast.Call, ast.Call]]:
    """The generate calls an async function runs on its event loop: (where it is called, the generate)."""
    hits = [
        (g, g)
        for g in generation_in(s, fn)
        if (not offloaded(s, g) and method(g) == "generate") or (s.is_pipeline_call(g) and not offloaded(s, g))
    ]
    hits += [
        (c, g)
        for c, g, off in helper_generation(s, fn)
        if not off
        and not offloaded(s, c)
        and callee(c) not in OFFLOAD
        and not isinstance(s.enclosing_function(g), ast.AsyncFunctionDef)
        and callee(g) != "Thread"
        and not offloaded(s, g)
        and not _is_generator(s.enclosing_function(g))
    ]
    return hits


def _streamer_reads(s: Script, fn: ast.AsyncFunctionDef) -> list[ast.AST]:
    """Where an async function reads a TextIteratorStreamer on its event loop: `for t in streamer`,
    `"".join(streamer)`, `next(streamer)`; each read waits on the streamer's queue for the next token (doctor-real-27
    d07, -25 d14). Not in a lambda or a call handed to run_in_executor / to_thread."""
    out: list[ast.AST] = []
    for n in ast.walk(fn):
        if s.enclosing_function(n) is not fn or offloaded(s, n):
            continue
        if (
            isinstance(n, ast.For)
            and _text_streamer(s, n.iter)
            and not any(isinstance(x, ast.Await) for x in ast.walk(n))
        ):
            out.append(n)  # (a loop that awaits between reads hands the loop back each token)
        elif (
            isinstance(n, ast.Call)
            and callee(n) in ("join", "next", "list")
            and n.args
            and _text_streamer(s, n.args[0])
        ):
            out.append(n)
    return out


def blocking_async_handler(s: Script):
    entry = _entry_points(s)
    for fns in s.functions.values():
        for fn in fns:
            if not isinstance(fn, ast.AsyncFunctionDef) or (fn.name in entry and not fn.decorator_list):
                continue
            hits = _blocking(s, fn)
            if not hits and (reads := _streamer_reads(s, fn)):
                yield (
                    reads[0],
                    (
                        f"`async def {fn.name}` reads a TextIteratorStreamer on the event loop: each read blocks "
                        "until the next token, so nothing else is served until the answer ends (iterate it in a "
                        "thread, or use AsyncTextIteratorStreamer with `async for`)"
                    ),
                )
            if hits:
                call, _ = hits[0]
                yield (
                    call,
                    (
                        f"`async def {fn.name}` runs generate on the event loop: every other request (and "
                        "stream) waits until it finishes"
                    ),
                )


def _is_generator(fn) -> bool:
    return fn is not None and any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in ast.walk(fn))

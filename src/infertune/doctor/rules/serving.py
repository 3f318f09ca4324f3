"""Serving rules: streaming, web handlers, the event loop."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    callee,
    const,
    dotted,
    has_star_kwargs,
    id_name,
    kw,
    lazy_compile,
    method,
    pipeline_model,
    receiver,
)
from infertune.doctor.rules.context import CPU_SIZED, params_in_id
from infertune.doctor.rules.handlers import OFFLOAD, generation_in, helper_generation, offloaded
from infertune.doctor.rules.loading import stays_on_cpu
from infertune.doctor.rules.outputs import completion_demo
from infertune.doctor.rules.prompts import BASE_LM, weight_ids
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


def streamer_same_thread(s: Script):
    targets = _thread_targets(s)
    for c in s.generates:
        st = kw(c, "streamer")
        if st is None or not any(
            isinstance(o, ast.Call) and callee(o) == "TextIteratorStreamer" for o in s.origins(st)
        ):
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


def _routes(s: Script):
    for fns in s.functions.values():
        yield from (fn for fn in fns if is_route(fn))


TIMERS = {"time.time", "time.perf_counter", "time.monotonic", "perf_counter", "timeit.default_timer"}


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
    ids = weight_ids(s)
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
    for fn in _routes(s):
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


def blocking_async_handler(s: Script):
    entry = _entry_points(s)
    for fns in s.functions.values():
        for fn in fns:
            if not isinstance(fn, ast.AsyncFunctionDef) or (fn.name in entry and not fn.decorator_list):
                continue
            hits = _blocking(s, fn)
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


# --- IT023: a model loaded per request, per UI event or per loop pass ----------------------------------------

CACHED = {"lru_cache", "cache", "cache_resource", "cache_data", "cached_property"}
UI_CALLBACK = {"Interface", "ChatInterface"}  # gr.Interface(fn, ...) / gr.ChatInterface(fn)
UI_EVENTS = {"click", "submit", "change", "input", "upload", "select"}  # component.click(fn, ...)


def _enclosing(s: Script, node: ast.AST) -> list[ast.AST]:
    """The node's ancestors up to (and with) its function, innermost first."""
    out = []
    while node in s.parents:
        node = s.parents[node]
        out.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            break
    return out


def _callbacks(s: Script) -> set[str]:
    """Functions a Gradio UI calls on every event."""
    out = set()
    for c in s.calls:
        if callee(c) in UI_CALLBACK or (isinstance(c.func, ast.Attribute) and c.func.attr in UI_EVENTS):
            fn = kw(c, "fn") or (c.args[0] if c.args else None)
            if isinstance(fn, ast.Name):
                out.add(fn.id)
    return out


def _loaded_weights(s: Script, c: ast.Call) -> bool:
    """A model load, or a pipeline given a checkpoint name (a pipeline around a model object is cheap)."""
    if c in s.loads:
        return True
    if isinstance(c.func, ast.Name) and c.func.id in s.assigns:  # `pipeline = pipeline(...)`, then pipeline(text)
        return False
    model = pipeline_model(c)
    if model is None or bool(s.strings(model)) or isinstance(model, ast.JoinedStr):
        return True
    # a name read from a request or a config (`job["model"]`, `data.get("model")`): a checkpoint name, loaded
    # each time (doctor-real-4 f08)
    return any(
        isinstance(o, ast.Subscript) or (isinstance(o, ast.Call) and method(o) == "get")
        for o in [model, *s.origins(model)]
    )


def _decorator(d: ast.expr) -> str:
    return dotted(d.func if isinstance(d, ast.Call) else d).split(".")[-1]


def _repeats(n: ast.AST, args: set[str]) -> bool:
    """A loop that runs the load again with the same arguments (a `for` over model names loads each once)."""
    if isinstance(n, ast.While):
        return True
    return isinstance(n, ast.For | ast.AsyncFor) and not (_names(n.target) & args)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _behind_a_check(s: Script, up: list[ast.AST]) -> bool:
    """Loaded once behind an `if`, or one of two loads of a try/except fallback (a `try` around a whole function
    body that only reports its error is no check)."""
    for n in up:
        if isinstance(n, ast.If):
            return True
        if isinstance(n, ast.Try) and any(
            x in s.loads or x in s.pipelines for h in n.handlers for x in ast.walk(h) if isinstance(x, ast.Call)
        ):
            return True
    return False


SETUP = lazy_compile(r"^(_*(main|init|setup|load|get|build|create|make|download|prepare)|__\w+__$)", IGNORECASE)


def _runs_on_argument(s: Script, fn: ast.FunctionDef | ast.AsyncFunctionDef, c: ast.Call) -> bool:
    """Does fn run what c loads on (something built from) one of its own parameters?"""
    derived = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} - {"self", "cls"}
    if not derived:
        return False
    body = sorted((n for n in ast.walk(fn) if isinstance(n, ast.Assign)), key=lambda n: n.lineno)
    for a in body:
        if _names(a.value) & derived:
            derived |= set().union(*(_names(t) for t in a.targets))
    derived |= {n for f in ast.walk(fn) if isinstance(f, ast.For | ast.comprehension) for n in _names(f.target)}
    if set().union(*(_names(a) for a in [*c.args, *(k.value for k in c.keywords)])) & derived:
        return False  # which model depends on the call (one per model name): not the same weights again
    for x in ast.walk(fn):
        if not isinstance(x, ast.Call) or s.enclosing_function(x) is not fn:
            continue
        runs = (s.is_pipeline_call(x) and c in s.origins(x.func)) or (
            x in s.generates and c in s.models_of(receiver(x))
        )
        if runs and set().union(*(_names(a) for a in [*x.args, *(k.value for k in x.keywords)])) & derived:
            return True
    return False


def _called_per_use(s: Script, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function of the file's API that loads and runs a model on its argument: called from nowhere here (a
    server or UI calls it per request), or from a loop."""
    if SETUP.match(fn.name):
        return False
    sites = [x for x in s.calls if fn in s.defined(x)]
    return not sites or any(
        isinstance(n, ast.For | ast.AsyncFor | ast.While | ast.comprehension) for x in sites for n in _enclosing(s, x)
    )


def _streamlit(s: Script) -> bool:
    return any(
        (isinstance(n, ast.Import) and any(a.name == "streamlit" for a in n.names))
        or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "streamlit")
        for n in s.tree.body
    )


def _cached(fn: ast.AST | None) -> bool:
    return isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) and any(
        _decorator(d) in CACHED or _decorator(d) == "experimental_singleton" for d in fn.decorator_list
    )


def _reruns(s: Script, fn: ast.FunctionDef | ast.AsyncFunctionDef | None, depth: int = 0) -> bool:
    """Runs on every Streamlit rerun: at module level, or in an uncached function called from a place that does."""
    if fn is None:
        return True
    if _cached(fn) or depth > 3:
        return False
    return any(_reruns(s, s.enclosing_function(x), depth + 1) for x in s.calls if fn in s.defined(x))


def model_load_per_request(s: Script):
    routes, callbacks = {id(f) for f in _routes(s)}, _callbacks(s)
    for c in [*s.loads, *s.pipelines]:
        if not _loaded_weights(s, c):
            continue
        up = _enclosing(s, c)
        fn = up[-1] if up and isinstance(up[-1], ast.FunctionDef | ast.AsyncFunctionDef) else None
        if _behind_a_check(s, up):
            continue
        if fn is not None and any(_decorator(d) in CACHED for d in fn.decorator_list):
            continue
        args = set().union(*(_names(a) for a in [*c.args, *(k.value for k in c.keywords)]))
        loop = next((n for n in up if _repeats(n, args)), None)
        if loop is not None:
            at = getattr(loop, "lineno", 0)
            yield (
                c,
                f"the model is loaded again on every pass of the loop at line {at} (nothing it loads changes "
                "between passes): load it once, before the loop",
            )
        elif fn is not None and id(fn) in routes:
            yield (c, f"web handler `{fn.name}` loads the model on every request: load it once at start-up")
        elif fn is not None and fn.name in callbacks:
            yield (c, f"UI callback `{fn.name}` loads the model on every event: load it once at start-up")
        elif _streamlit(s) and _reruns(s, fn):
            yield (
                c,
                "Streamlit reruns the whole script on every interaction, and this load with it: load it in a "
                "function decorated with @st.cache_resource",
            )
        elif fn is not None and _runs_on_argument(s, fn, c) and _called_per_use(s, fn):
            yield (
                c,
                f"`{fn.name}` loads the model on every call and runs it on its argument: load it once, outside "
                "the function (module level or a cached loader)",
            )

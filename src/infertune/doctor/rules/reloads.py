"""IT023: a model loaded again for nothing: per web request, per UI event, per loop pass, per Streamlit rerun, per
call of a helper that runs it on its argument."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, callee, dotted, kw, lazy_compile, method, pipeline_model, receiver
from infertune.doctor.rules.forward import forward_calls
from infertune.doctor.rules.serving import routes
from infertune.doctor.script import Script

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


# constructors of other libraries that read a transformers checkpoint's weights: sentence-transformers' models,
# LangChain's Hugging Face embeddings (a SentenceTransformer inside), openai-whisper's loader
WRAPPED_LOADS = {
    "SentenceTransformer",
    "CrossEncoder",
    "HuggingFaceEmbeddings",
    "HuggingFaceBgeEmbeddings",
    "HuggingFaceInstructEmbeddings",
    "whisper.load_model",
}


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


def _variant_per_pass(s: Script, c: ast.Call, loop: ast.AST) -> bool:
    """Each pass hands the fresh model to a call together with the loop's variable (`run(model, quant_type)`, which
    quantizes or converts it for that variant): the reload is the clean copy the pass needs (doctor-real-17 b01,
    a GPTQ variants benchmark, labelled so)."""
    if not isinstance(loop, ast.For | ast.AsyncFor):
        return False
    stmt = s.statement(c)
    held = ({dotted(u) for u in s.uses(c)} | {dotted(x) for x in getattr(stmt, "targets", [])}) - {""}
    return any(  # (both handed over as arguments: `generator(prompt)`, running it on the item, is no variant)
        isinstance(x, ast.Call)
        and (given := {a.id for a in [*x.args, *(k.value for k in x.keywords)] if isinstance(a, ast.Name)}) & held
        and given & _names(loop.target)
        for x in ast.walk(loop)
        if s.enclosing_function(x) is s.enclosing_function(c)
    )


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


GUARD_CALLS = {"hasattr", "getattr", "exists", "isfile", "isdir", "is_available", "isinstance"}


def _load_guard(s: Script, test: ast.expr, c: ast.Call) -> bool:
    """A test of whether the weights are loaded yet (`model is None`, `not model`, `name not in cache`, `hasattr`),
    of a file or device, or one naming what the load is stored in; not a request's own checks
    (`form.is_valid()`, `request.method == "POST"`) nor a choice of model (`choice == "roberta"`)."""
    stmt = s.statement(c)
    stored = {dotted(t) for t in stmt.targets} if isinstance(stmt, ast.Assign) else set()
    for n in ast.walk(test):
        if isinstance(n, ast.Compare) and any(isinstance(op, ast.Is | ast.IsNot | ast.In | ast.NotIn) for op in n.ops):
            return True
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.Not):
            return True
        if isinstance(n, ast.Call) and callee(n) in GUARD_CALLS:
            return True
        if isinstance(n, ast.Name | ast.Attribute) and dotted(n) in (stored | {"__name__"}):
            return True  # (the main guard: what it holds runs once)
    return isinstance(test, ast.Name | ast.Attribute | ast.Constant)  # a switch (`if LOAD_MODEL:`)


def _behind_a_check(s: Script, up: list[ast.AST], c: ast.Call) -> bool:
    """Loaded once behind an `if` that is a load guard (`_load_guard`), or one of two loads of a try/except
    fallback (a `try` around a whole function body that only reports its error is no check). A request's own
    checks are not guards: a Django view's `if form.is_valid():` then `if choice == "roberta":` loads on every
    post (doctor-real-25 a06)."""
    for n in up:
        if isinstance(n, ast.If) and _load_guard(s, n.test, c):
            return True
        if isinstance(n, ast.Try) and any(
            x in s.loads or x in s.pipelines for h in n.handlers for x in ast.walk(h) if isinstance(x, ast.Call)
        ):
            return True
    return False


SETUP = lazy_compile(r"^(_*(main|init|setup|load|get|build|create|make|download|prepare)|__\w+__$)", IGNORECASE)


def _flask_request(s: Script) -> bool:
    return any(
        isinstance(n, ast.ImportFrom) and n.module == "flask" and any(a.name == "request" for a in n.names)
        for n in s.nodes
    )


def _runs_on_argument(s: Script, fn: ast.FunctionDef | ast.AsyncFunctionDef, c: ast.Call) -> bool:
    """Does fn run what c loads on (something built from) one of its own parameters?"""
    derived = {a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs} - {"self", "cls"}
    if _flask_request(s):
        derived.add("request")  # Flask's request proxy: what the function reads from it is the request's
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
        pipes = s.origins(x.func) if s.is_pipeline_call(x) else []
        runs = (
            c in pipes  # (or the pipeline built around what c loads: doctor-real-14 c01)
            or any(p in s.pipelines and (m := pipeline_model(p)) is not None and c in s.models_of(m) for p in pipes)
            or (x in s.generates and c in s.models_of(receiver(x)))
            or (x, c) in forward_calls(s)  # a classifier's or encoder's own forward pass (doctor-real-25 a06)
        )
        if runs and set().union(*(_names(a) for a in [*x.args, *(k.value for k in x.keywords)])) & derived:
            return True
    return False


def _called_per_use(s: Script, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function of the file's API that loads and runs a model on its argument: called from nowhere here (a
    server or UI calls it per request), or from a loop."""
    if SETUP.match(fn.name):
        return False
    sites = s.call_sites(fn)
    return not sites or any(
        isinstance(n, ast.For | ast.AsyncFor | ast.While | ast.comprehension) for x in sites for n in _enclosing(s, x)
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
    return any(_reruns(s, s.enclosing_function(x), depth + 1) for x in s.call_sites(fn))


def _reload(s: Script, c: ast.Call, handlers: set[int], callbacks: set[str]) -> tuple[ast.AST, str] | None:
    """(the scope that reloads, its message) for a load that runs again per request, event, pass or rerun."""
    up = _enclosing(s, c)
    fn = up[-1] if up and isinstance(up[-1], ast.FunctionDef | ast.AsyncFunctionDef) else None
    if _behind_a_check(s, up, c) or (fn is not None and any(_decorator(d) in CACHED for d in fn.decorator_list)):
        return None
    args = set().union(*(_names(a) for a in [*c.args, *(k.value for k in c.keywords)]))
    loop = next((n for n in up if _repeats(n, args)), None)
    if loop is not None and not _variant_per_pass(s, c, loop):
        at = getattr(loop, "lineno", 0)
        return loop, (
            f"the model is loaded again on every pass of the loop at line {at} (nothing it loads changes "
            "between passes): load it once, before the loop"
        )
    if fn is not None and id(fn) in handlers:
        return fn, f"web handler `{fn.name}` loads the model on every request: load it once at start-up"
    if fn is not None and fn.name in callbacks:
        return fn, f"UI callback `{fn.name}` loads the model on every event: load it once at start-up"
    if s.imports("streamlit") and _reruns(s, fn):
        return s.tree, ""
    if fn is not None and _runs_on_argument(s, fn, c) and _called_per_use(s, fn):
        return fn, (
            f"`{fn.name}` loads the model on every call and runs it on its argument: load it once, outside "
            "the function (module level or a cached loader)"
        )
    return None


def model_load_per_request(s: Script):
    """A model (or pipeline) load that runs per request, event, loop pass or Streamlit rerun; a tokenizer's too,
    where no model load of the same scope is reported (one problem per scope: doctor-real-10 a07, a tokenizer read
    in a route whose model is global; doctor-real-7 a12, a Streamlit page whose model is cached and tokenizer not)."""
    handlers, callbacks, page, scopes = {id(f) for f in routes(s)}, _callbacks(s), [], set()
    wrapped = [c for c in s.calls if callee(c) in WRAPPED_LOADS or dotted(c.func) in WRAPPED_LOADS]
    models = [c for c in [*s.loads, *s.pipelines] if _loaded_weights(s, c)] + wrapped
    for c in [*models, *s.tokenizers]:
        if (found := _reload(s, c, handlers, callbacks)) is None:
            continue
        scope, message = found
        if c not in models and id(scope) in scopes and scope is not s.tree:
            continue  # (the model's load in the same scope is the finding)
        scopes.add(id(scope))
        if scope is s.tree:
            page.append(c)
        else:
            yield c, message
    groups: dict[int, list[ast.Call]] = {}  # one problem per loader of the page (a function, a class's methods
    for c in page:  # together) or for its module level: doctor-real-9 k15, -5 p17 labelled once; -23 a07 three times
        fn = s.enclosing_function(c)
        owner = s.parents.get(fn) if fn is not None else None
        groups.setdefault(id(owner if isinstance(owner, ast.ClassDef) else fn), []).append(c)
    for loads in groups.values():
        more = f" (and {len(loads) - 1} more)" if len(loads) > 1 else ""
        yield (
            min(loads, key=lambda x: (x not in models, x.lineno)),
            f"Streamlit reruns the whole script on every interaction, and this load{more} with it: load the "
            "model in a function decorated with @st.cache_resource",
        )

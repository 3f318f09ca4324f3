"""One parsed script and the data flow the rules share (standard library only: `doctor` starts in tens of ms).

Names are followed file-wide: an assignment (also tuple unpacking, `self.x = ...`, a walrus, `+=`, a `for`
target), a method chain (`.to(...)`, `.eval()`, `.cuda()`, `merge_and_unload()`), `torch.compile(x)`, a PEFT
adapter, a call to a function or method defined in the file (its `return` values; its parameters take the
arguments of their call sites) and a list comprehension are all followed back to where a value comes from:
a model load, a tokenizer, a pipeline, a `generate` output, a string. A use sees the last assignment above it
in the same function; otherwise names are file-wide (one name, one set of values): simple, and right on the
scripts people write.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from infertune.doctor.nodes import (  # noqa: F401  (re-exported: the rules import them from here)
    ENCODER_DECODER,
    GENERATIVE,
    MODEL_CLASS,
    MOVES,
    NOT_MODELS,
    OTHER_RUNTIME,
    PASSTHROUGH,
    PLACES,
    QUANTIZED_ID,
    TOKENIZER_CLASS,
    Finding,
    Target,
    callee,
    const,
    dotted,
    has_star_kwargs,
    kw,
    method,
)


@dataclass
class Unpack:
    """The `index`-th item of what `value` evaluates to (`a, b = f()`)."""

    value: ast.expr
    index: int


def _line(v) -> int | None:
    return getattr(v.value if isinstance(v, Unpack) else v, "lineno", None)


@dataclass
class Script:
    path: str
    source: str
    tree: ast.Module
    target: Target = field(default_factory=Target)
    generation_defaults: dict | None = None  # the model's generation_config.json when it is here

    def __post_init__(self) -> None:
        self.lines = self.source.splitlines()
        self.parents: dict[ast.AST, ast.AST] = {}
        self.calls: list[ast.Call] = []
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.assigns: dict[str, list] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            if isinstance(node, ast.Call):
                self.calls.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    self._bind(t, node.value)
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                self._bind(node.target, node.value)
            elif isinstance(node, (ast.For, ast.AsyncFor)) and dotted(node.target):  # for row in out: out[i]
                row = ast.copy_location(ast.Subscript(value=node.iter, slice=ast.Constant(0), ctx=ast.Load()), node)
                self.parents[row] = node
                self._bind(node.target, row)
            elif isinstance(node, ast.AugAssign) and dotted(node.target):  # x += v is x = x + v
                grown = ast.copy_location(
                    ast.BinOp(left=ast.Name(dotted(node.target), ast.Load()), op=node.op, right=node.value), node
                )
                ast.copy_location(grown.left, node)
                self.parents[grown], self.parents[grown.left] = node, grown
                self._bind(node.target, grown)
        for c in self.calls:  # a function's parameters take its call sites' arguments
            for fn in self.defined(c):
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                if params and params[0] in ("self", "cls") and isinstance(c.func, ast.Attribute):
                    params = params[1:]
                for p, a in zip(params, c.args, strict=False):
                    self.assigns.setdefault(p, []).append(a)
                for k in c.keywords:
                    if k.arg in params or k.arg in [a.arg for a in fn.args.kwonlyargs]:
                        self.assigns.setdefault(k.arg, []).append(k.value)
        self._memo: dict[int, list] = {}
        self.loads = [c for c in self.calls if self.is_model_load(c)]
        self.tokenizers = [c for c in self.calls if self.is_tokenizer_load(c)]
        self.pipelines = [
            c for c in self.calls if callee(c) == "pipeline" and dotted(c.func) in ("pipeline", "transformers.pipeline")
        ]
        self.generates = [c for c in self.calls if method(c) == "generate" and not self.foreign(c.func.value)]
        self.thread_generates = [
            c
            for c in self.calls
            if callee(c) in ("Thread", "submit")
            and isinstance(t := kw(c, "target") or (c.args[0] if c.args else None), ast.Attribute)
            and t.attr == "generate"
        ]
        self.trains = any(
            callee(c) in ("Trainer", "SFTTrainer", "TrainingArguments", "SFTConfig", "backward") for c in self.calls
        )

    def defined(self, c: ast.Call) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
        """The functions of this file a call runs: `f(...)`, `self.f(...)` (not `model.generate(...)`)."""
        func = c.func
        if isinstance(func, ast.Name) or (isinstance(func, ast.Attribute) and dotted(func.value) in ("self", "cls")):
            return self.functions.get(callee(c), [])
        if isinstance(func, ast.Attribute) and hasattr(self, "_memo"):  # engine.stream(...), engine = Engine()
            classes = {callee(o) for o in self.origins(func.value) if isinstance(o, ast.Call)} & set(self.classes)
            return [
                f
                for name in classes
                for f in self.classes[name].body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == func.attr
            ]
        return []

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for i, t in enumerate(target.elts):
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    self._bind(t, value.elts[i])
                else:
                    self._bind(t, Unpack(value, i))  # type: ignore[arg-type]
        elif name := dotted(target):
            self.assigns.setdefault(name, []).append(value)

    # --- following values back to where they come from ---------------------------------------------------

    def origins(self, node, depth: int = 0) -> list:
        """Where a value comes from: the calls, literals and comprehensions that produce it."""
        if depth > 12 or node is None:
            return []
        key = id(node)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = []  # cycles end here
        out = self._origins(node, depth)
        self._memo[key] = out
        return out

    def _origins(self, node, depth: int) -> list:
        d = depth + 1
        if isinstance(node, Unpack):
            out = []
            for o in self.origins(node.value, d):
                if isinstance(o, (ast.Tuple, ast.List)) and node.index < len(o.elts):
                    out += self.origins(o.elts[node.index], d)
            return out
        if isinstance(node, (ast.Name, ast.Attribute)) and (name := dotted(node)) in self.assigns:
            return [o for v in self.reaching(name, node) for o in self.origins(v, d)]
        if isinstance(node, ast.Attribute) and node.attr == "model":  # pipe.model, self.pipe.model
            pipes = [o for o in self.origins(node.value, d) if o in self.pipelines]
            if pipes:
                return [o for p in pipes for o in self.origins(kw(p, "model") or ast.Constant(None), d)] or pipes
        if isinstance(node, ast.Call):
            m = method(node)
            if m in MOVES:  # x.to(...).eval(): still x
                return self.origins(node.func.value, d)
            if (dotted(node.func) == "torch.compile" or callee(node) in PASSTHROUGH) and node.args:
                return self.origins(node.args[0], d)
            if m == "from_pretrained" and dotted(node.func.value).split(".")[-1] == "PeftModel" and node.args:
                return self.origins(node.args[0], d)  # an adapter on the base model: still that model
            fns = self.defined(node)
            if fns and not self.is_model_load(node):
                rets = [r.value for fn in fns for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value]
                return [o for r in rets for o in self.origins(r, d)]
        if isinstance(node, ast.IfExp):
            return self.origins(node.body, d) + self.origins(node.orelse, d)
        if isinstance(node, ast.Await):
            return self.origins(node.value, d)
        return [node]

    def reaching(self, name: str, use: ast.AST) -> list:
        """The assignments of `name` that reach this use: the last one above it in the same function (or
        module), else all of them (a use in a function defined before its call sites)."""
        values = self.assigns[name]
        line, fn = getattr(use, "lineno", None), self.enclosing_function(use)
        if line is None or len(values) == 1:
            return values
        before = [
            v
            for v in values
            if _line(v) is not None
            and _line(v) < line
            and self.enclosing_function(v.value if isinstance(v, Unpack) else v) is fn
        ]
        return [max(before, key=_line)] if before else values

    def strings(self, node, depth: int = 0) -> list[tuple[ast.AST, str]]:
        """The literal text a string value is built from (f-strings, `+`, `.format`, `join`, helpers)."""
        out: list[tuple[ast.AST, str]] = []
        for o in self.origins(node):
            if depth > 6:
                break
            if isinstance(o, ast.Constant) and isinstance(o.value, str):
                out.append((o, o.value))
            elif isinstance(o, ast.JoinedStr):
                text = "".join(v.value for v in o.values if isinstance(v, ast.Constant))
                out.append((o, text))
                for v in o.values:
                    if isinstance(v, ast.FormattedValue):
                        out += self.strings(v.value, depth + 1)
            elif isinstance(o, (ast.List, ast.Tuple)):
                out += [x for e in o.elts for x in self.strings(e, depth + 1)]
            elif isinstance(o, ast.BinOp):
                out += self.strings(o.left, depth + 1) + self.strings(o.right, depth + 1)
            elif isinstance(o, ast.Call) and method(o) in ("format", "strip", "join", "replace", "lstrip", "rstrip"):
                out += self.strings(o.func.value, depth + 1)  # never replace()'s arguments: they are removed
                if method(o) == "join":
                    out += [x for a in o.args[:1] for x in self.strings(a, depth + 1)]
        return out

    # --- what a value is ----------------------------------------------------------------------------------

    def is_model_load(self, c: ast.AST) -> bool:
        if not (isinstance(c, ast.Call) and method(c) == "from_pretrained"):
            return False
        name = dotted(c.func.value).split(".")[-1]
        return (
            name not in NOT_MODELS
            and name != "PeftModel"
            and bool(MODEL_CLASS.match(name))
            and not TOKENIZER_CLASS.search(name)
        )

    def torch_generative(self, load: ast.Call) -> bool:
        """A PyTorch generative model (the dtype/placement rules' subject)."""
        name = self.model_class(load)
        return bool(GENERATIVE.search(name)) and not OTHER_RUNTIME.match(name)

    def is_tokenizer_load(self, c: ast.AST) -> bool:
        return (
            isinstance(c, ast.Call)
            and method(c) == "from_pretrained"
            and bool(TOKENIZER_CLASS.search(dotted(c.func.value).split(".")[-1]))
        )

    def models_of(self, node) -> list[ast.Call]:
        return [o for o in self.origins(node) if o in self.loads]

    def is_tokenizer(self, node) -> bool:
        return any(o in self.tokenizers for o in self.origins(node)) or dotted(node).split(".")[-1] in (
            "tokenizer",
            "tok",
            "processor",
        )

    def foreign(self, node) -> bool:
        """A value known to come from elsewhere than transformers (vLLM's LLM, an OpenAI client, ...)."""
        origins = self.origins(node)
        return bool(origins) and all(
            isinstance(o, ast.Call) and o not in self.loads and o not in self.pipelines and not self.is_model_load(o)
            for o in origins
        )

    def model_class(self, load: ast.Call) -> str:
        return dotted(load.func.value).split(".")[-1]

    def model_id(self, load: ast.Call) -> str | None:
        arg = load.args[0] if load.args else kw(load, "pretrained_model_name_or_path") or kw(load, "model")
        ids = [t for _, t in self.strings(arg)] if arg is not None else []
        return ids[0] if ids else None

    def encoder_decoder(self) -> bool:
        return any(ENCODER_DECODER.search(self.model_class(c)) for c in self.loads) or any(
            const(p.args[0] if p.args else kw(p, "task")) in ("text2text-generation", "summarization", "translation")
            for p in self.pipelines
        )

    def quantized(self, load: ast.Call) -> bool:
        """Loaded quantized: bitsandbytes/GPTQ/AWQ config, load_in_4bit/8bit, or a pre-quantized checkpoint."""
        if any(kw(load, k) is not None for k in ("quantization_config", "load_in_8bit", "load_in_4bit", "gguf_file")):
            return True
        return bool(QUANTIZED_ID.search(self.model_id(load) or ""))

    # --- where things are ---------------------------------------------------------------------------------

    def uses(self, load: ast.Call) -> list[ast.AST]:
        """Expressions that evaluate to this load's model (its names and chains)."""
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
                if dotted(node) in self.assigns and load in self.models_of(node):
                    out.append(node)
        return out

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None

    def comment_near(self, line: int) -> str:
        out = []
        for n in (line - 1, line):
            if 1 <= n <= len(self.lines) and "#" in self.lines[n - 1]:
                out.append(self.lines[n - 1].split("#", 1)[1])
        return " ".join(out).lower()

    def called_method(self, node: ast.AST) -> ast.Call | None:
        """`node.m(...)`: the call, when node is the receiver of a method call."""
        attr = self.parents.get(node)
        call = self.parents.get(attr)
        if isinstance(attr, ast.Attribute) and isinstance(call, ast.Call) and call.func is attr:
            return call
        return None

    def star_options(self, c: ast.Call) -> bool:
        """`**kw` that may carry options (not `**inputs`, a tokenizer's output)."""
        return any(k.arg is None and self.star_options_value(k.value) for k in c.keywords)

    def star_options_value(self, value: ast.expr) -> bool:
        return not (
            re.search(r"input|encod|batch|token", dotted(value), re.I)
            or any(
                isinstance(o, ast.Call) and (self.is_tokenizer_call(o) or method(o) == "apply_chat_template")
                for o in self.origins(value)
            )
        )

    def calls_named(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if callee(c) == name]

    def calls_method(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if method(c) == name]

    def sinks_of(self, node: ast.AST) -> list[ast.Call]:
        """The generate/pipeline/tokenizer calls this value flows into (by name, file-wide)."""
        names = {dotted(node)} if dotted(node) else set()
        n = node
        while isinstance(
            self.parents.get(n),
            (
                ast.Call,
                ast.Attribute,
                ast.keyword,
                ast.Subscript,
                ast.Starred,
                ast.BinOp,
                ast.JoinedStr,
                ast.FormattedValue,
                ast.Dict,
                ast.List,
            ),
        ):
            p = self.parents[n]
            if isinstance(p, ast.Call) and self.is_sink(p):
                return [p]
            n = p
        if isinstance(self.parents.get(n), ast.Return):
            fn = self.enclosing_function(n)
            if fn is not None:
                return [s for c in self.calls_named(fn.name) for s in self.sinks_of(c)]
        names = self.flow_names(node) | names
        out = []
        for c in self.calls:
            if self.is_sink(c) and any(
                dotted(a) in names for arg in c.args + [k.value for k in c.keywords] for a in ast.walk(arg)
            ):
                out.append(c)
        return out

    def flow_names(self, node: ast.AST) -> set[str]:
        """The names this value is bound to, and those bound to values built from them (a few steps)."""
        n = node
        while isinstance(self.parents.get(n), (ast.Attribute, ast.Subscript)) or (
            isinstance(self.parents.get(n), ast.Call) and self.parents[n].func is n
        ):
            n = self.parents[n]  # tok(...).to(device), tok(...)["input_ids"]
        a = self.parents.get(n)
        names = (
            {dotted(t) for t in a.targets}
            if isinstance(a, ast.Assign)
            else ({dotted(a.target)} if isinstance(a, (ast.AnnAssign, ast.NamedExpr)) else set())
        )
        names.discard("")
        for _ in range(3):
            grown = {
                t
                for t, vs in self.assigns.items()
                if t not in names
                and any(
                    isinstance(v, ast.AST)
                    and any(isinstance(x, (ast.Name, ast.Attribute)) and dotted(x) in names for x in ast.walk(v))
                    for v in vs
                )
            }
            if not grown:
                break
            names |= grown
        return names

    def is_sink(self, c: ast.Call) -> bool:
        return (
            c in self.generates
            or c in self.thread_generates
            or self.is_pipeline_call(c)
            or self.is_tokenizer_call(c)
            or (method(c) in ("encode", "apply_chat_template") and self.is_tokenizer(c.func.value))
        )

    def is_tokenizer_call(self, c: ast.Call) -> bool:
        """`tok(text, ...)`: the tokenizer (or processor) itself called."""
        return isinstance(c.func, (ast.Name, ast.Attribute)) and self.is_tokenizer(c.func)

    def is_pipeline_call(self, c: ast.Call) -> bool:
        return isinstance(c.func, (ast.Name, ast.Attribute)) and any(o in self.pipelines for o in self.origins(c.func))

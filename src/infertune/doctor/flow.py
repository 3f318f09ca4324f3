"""A parsed file's data flow (standard library only): names followed back to where their values come from.

Names are followed file-wide: an assignment (also tuple unpacking, `self.x = ...`, a walrus, `+=`, a `for`
target), a method chain (`.to(...)`, `.eval()`, `.cuda()`, `merge_and_unload()`), `torch.compile(x)`, a PEFT
adapter, a call to a function or method defined in the file (its `return` values; its parameters take the
arguments of their call sites) and a list comprehension are all followed back to where a value comes from:
a model load, a tokenizer, a pipeline, a `generate` output, a string. A use sees the last assignment above it
in the same function; otherwise names are file-wide (one name, one set of values): simple, and right on the
scripts people write.
"""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.literals import Literals
from infertune.doctor.nodes import (
    MODEL_CLASS,
    MOVES,
    NOT_MODELS,
    PASSTHROUGH,
    TOKENIZER_CLASS,
    Record,
    callee,
    const,
    dotted,
    kw,
    method,
    receiver,
)


class Unpack(Record):
    """The `index`-th item of what `value` evaluates to (`a, b = f()`; nested: `(a, b), c = f()`)."""

    _fields = ("value", "index")

    def __init__(self, value: ast.expr | Unpack, index: int) -> None:
        self.value, self.index = value, index


ENV_READS = {"os.getenv", "os.environ.get", "environ.get", "getenv"}


BRANCHES = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.match_case)


def _site(v: ast.AST | Unpack) -> ast.AST | None:
    """Where an assigned value is written: the expression, or the one an Unpack takes its item from (None for
    an item of an item: `(a, b), c = f()`)."""
    inner = v.value if isinstance(v, Unpack) else v
    return inner if isinstance(inner, ast.AST) else None


def _line(v: ast.AST | Unpack) -> int | None:
    return getattr(_site(v), "lineno", None)


class Flow(Literals):
    """The file's tables (parents, calls, functions, classes, what each name is bound to), its sources (model
    loads, tokenizers, pipelines) and where a value comes from. `Script` (doctor/script.py) builds on it."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents: dict[ast.AST, ast.AST] = {}
        self.calls: list[ast.Call] = []
        self.functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        self.assigns: dict[str, list] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self.nodes: list[ast.AST] = []  # every node, walked once (the rules scan the file many times)
        for node in ast.walk(self.tree):
            self.nodes.append(node)
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
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)) and dotted(node.target):
                # for row in out, [... for row in out]: a row of out (out[i])
                at = node if not isinstance(node, ast.comprehension) else node.iter
                row = ast.copy_location(ast.Subscript(value=node.iter, slice=ast.Constant(0), ctx=ast.Load()), at)
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
        self.arg_defaults: dict[str, ast.expr] = {}  # argparse: args.<dest> -> its default=
        for c in self.calls:
            if method(c) == "add_argument" and (default := kw(c, "default")) is not None:
                names = [a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
                dest = kw(c, "dest")
                name = (
                    dest.value
                    if isinstance(dest, ast.Constant)
                    else next((n for n in names if n.startswith("--")), names[0] if names else "")
                )
                if isinstance(name, str) and name:
                    self.arg_defaults.setdefault(name.lstrip("-").replace("-", "_"), default)
        self._memo: dict[int, list] = {}
        self.loads = [c for c in self.calls if self.is_model_load(c)]
        self.tokenizers = [c for c in self.calls if self.is_tokenizer_load(c)]
        # after `pipeline = pipeline(...)` (or `= transformers.pipeline(...)`), pipeline(...) runs the one built
        rebound = min((_line(v) or 0 for v in self.assigns.get("pipeline", [])), default=None)
        self.pipelines = [
            c
            for c in self.calls
            if dotted(c.func) == "transformers.pipeline"
            or (dotted(c.func) == "pipeline" and (rebound is None or c.lineno <= rebound))
        ]

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

    def call_sites(self, fn: ast.AST | None) -> list[ast.Call]:
        """The calls of this file that run function fn (none for None)."""
        return [c for c in self.calls if fn is not None and fn in self.defined(c)]

    def _bind(self, target: ast.expr, value: ast.expr | Unpack) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for i, t in enumerate(target.elts):
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    self._bind(t, value.elts[i])
                else:
                    self._bind(t, Unpack(value, i))
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
        if isinstance(node, ast.Attribute) and node.attr in self.arg_defaults and self._parsed_args(node.value, d):
            return self.origins(self.arg_defaults[node.attr], d)  # args.model: the argparse default
        if isinstance(node, ast.Attribute) and node.attr == "model":  # pipe.model, self.pipe.model
            pipes = [o for o in self.origins(node.value, d) if o in self.pipelines]
            if pipes:
                return [o for p in pipes for o in self.origins(kw(p, "model") or ast.Constant(None), d)] or pipes
        if isinstance(node, ast.Call):
            m = method(node)
            if m in MOVES:  # x.to(...).eval(): still x
                return self.origins(receiver(node), d)
            if (dotted(node.func) == "torch.compile" or callee(node) in PASSTHROUGH) and node.args:
                return self.origins(node.args[0], d)
            if m == "from_pretrained" and dotted(receiver(node)).split(".")[-1] == "PeftModel" and node.args:
                return self.origins(node.args[0], d)  # an adapter on the base model: still that model
            fns = self.defined(node)
            if fns and not self.is_model_load(node):
                rets = [r.value for fn in fns for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value]
                return [o for r in rets for o in self.origins(r, d)]
        if isinstance(node, ast.IfExp):
            return self.origins(node.body, d) + self.origins(node.orelse, d)
        if isinstance(node, ast.Call) and dotted(node.func) in ENV_READS and len(node.args) > 1:
            return self.origins(node.args[1], d)  # os.getenv("MODEL", "org/name"): the default
        if isinstance(node, ast.Attribute) and (field := self._class_field(node, d)) is not None:
            return self.origins(field, d)  # cfg.model_name, cfg = Config(): the class's default
        if isinstance(node, ast.Subscript) and (key := const(node.slice)) is not None:
            items = [
                v
                for o in self.origins(node.value, d)
                if isinstance(o, ast.Dict)
                for k, v in zip(o.keys, o.values, strict=True)
                if k is not None and const(k) == key
            ]
            if items:  # MODELS["small"] of a dict literal: that entry
                return [o for v in items for o in self.origins(v, d)]
        if isinstance(node, ast.Call) and method(node) == "get" and node.args:
            key = const(node.args[0])  # MODELS.get(name, name) of a dict literal: its entries (that key's, if known)
            entries = [
                v
                for o in self.origins(receiver(node), d)
                if isinstance(o, ast.Dict)
                for k, v in zip(o.keys, o.values, strict=True)
                if k is not None and (key is None or const(k) == key)
            ]
            if entries:
                rest = [o for a in node.args[1:2] for o in self.origins(a, d)]
                return [o for v in entries for o in self.origins(v, d)] + rest
        if isinstance(node, ast.Name) and node.id not in self.assigns:
            passed = self._parameter_values(node)
            if passed:  # a parameter: its default and what this file's call sites pass
                return [o for v in passed for o in self.origins(v, d)]
        if isinstance(node, ast.Await):
            return self.origins(node.value, d)
        return [node]

    def _class_field(self, node: ast.Attribute, depth: int) -> ast.expr | None:
        """`obj.attr` where obj is an instance of a class of this file (`Config()`) whose body gives attr a
        value (`attr: str = "..."`, `attr = "..."`), unless the call passes it by keyword."""
        for o in self.origins(node.value, depth + 1):
            if not (isinstance(o, ast.Call) and callee(o) in self.classes):
                continue
            passed = kw(o, node.attr)
            if passed is not None:
                return passed
            for stmt in self.classes[callee(o)].body:
                if isinstance(stmt, ast.AnnAssign) and dotted(stmt.target) == node.attr and stmt.value is not None:
                    return stmt.value
                if isinstance(stmt, ast.Assign) and any(dotted(x) == node.attr for x in stmt.targets):
                    return stmt.value
        return None

    def _parameter_values(self, node: ast.Name) -> list[ast.expr]:
        """For a parameter of the enclosing function: its default and the arguments this file's calls pass it
        (`f(x)`, `f(name=x)`; `Cls(x)` for `__init__`). Empty when it is no parameter or nothing is known."""
        fn = self.enclosing_function(node)
        if fn is None:
            return []
        params = [*fn.args.posonlyargs, *fn.args.args]
        names = [a.arg for a in params]
        if node.id not in names and node.id not in [a.arg for a in fn.args.kwonlyargs]:
            return []
        out: list[ast.expr] = []
        if node.id in names:
            i = names.index(node.id)
            defaults = fn.args.defaults
            if i >= len(names) - len(defaults):
                out.append(defaults[i - (len(names) - len(defaults))])
        else:
            j = [a.arg for a in fn.args.kwonlyargs].index(node.id)
            if (dflt := fn.args.kw_defaults[j]) is not None:
                out.append(dflt)
        owner = next((c for c in self.classes.values() if fn in c.body), None)
        called, skip = (owner.name, 1) if owner is not None and fn.name == "__init__" else (fn.name, 0)
        for c in self.calls:
            if callee(c) != called or (owner is None and fn not in self.defined(c)):
                continue
            i = names.index(node.id) - skip if node.id in names else -1
            if 0 <= i < len(c.args) and not any(isinstance(a, ast.Starred) for a in c.args[: i + 1]):
                out.append(c.args[i])
            out += [k.value for k in c.keywords if k.arg == node.id]
        return out

    def _parsed_args(self, node: ast.AST, depth: int) -> bool:
        """Is this value argparse's namespace (parser.parse_args(), or the first of parse_known_args())? A parameter
        is what its function's calls pass, when the file shows them: a helper's `args` that every call fills with a
        `SimpleNamespace` is none, whatever `args` holds elsewhere (doctor-real-27 b05)."""
        parse = ("parse_args", "parse_known_args")
        if isinstance(node, ast.Name) and depth < 6 and (passed := self._parameter_values(node)):
            return any(self._parsed_args(v, depth + 1) for v in passed)
        for v in self.assigns.get(dotted(node), []) if isinstance(node, ast.Name | ast.Attribute) else []:
            if isinstance(v, Unpack) and v.index == 0 and isinstance(v.value, ast.Call) and method(v.value) in parse:
                return True  # args, rest = parser.parse_known_args()
        return any(isinstance(o, ast.Call) and method(o) in parse for o in self.origins(node, depth))

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
            if (site := _site(v)) is not None
            and (at := _line(v)) is not None
            and at < line
            and self.enclosing_function(site) is fn
        ]
        if not before:
            return values  # (every line here is known)
        around: set[ast.AST] = set()  # the use and everything it sits in
        node: ast.AST | None = use
        while node is not None:
            around.add(node)
            node = self.parents.get(node)
        out = []
        for v in sorted(before, key=lambda v: _line(v) or 0, reverse=True):
            out.append(v)
            if not self._branch_apart(_site(v), around):
                break  # the last assignment that always runs on the way to the use: the earlier ones are dead
        return out

    def _branch_apart(self, site: ast.AST | None, around: set[ast.AST]) -> bool:
        """Is this assignment in a branch (an if, a loop, an except) the use (`around`: it and its ancestors) is not
        in: one that may not run on the way to it (`if cuda: device = "cuda"` / `else: device = "cpu"`, then a read:
        both reach it)?"""
        node = site
        while node is not None and node not in around:
            if isinstance(node, BRANCHES):
                return True
            node = self.parents.get(node)
        return False

    def is_model_load(self, c: ast.AST) -> bool:
        if not (isinstance(c, ast.Call) and method(c) == "from_pretrained"):
            return False
        name = dotted(receiver(c)).split(".")[-1]
        return (
            name not in NOT_MODELS
            and name != "PeftModel"
            and bool(MODEL_CLASS.match(name))
            and not TOKENIZER_CLASS.search(name)
        )

    def is_tokenizer_load(self, c: ast.AST) -> bool:
        return (
            isinstance(c, ast.Call)
            and method(c) == "from_pretrained"
            and bool(TOKENIZER_CLASS.search(dotted(receiver(c)).split(".")[-1]))
        )

    def statement(self, node: ast.AST) -> ast.AST:
        """The statement holding this node (itself, when it is one; the module's root when it is in none)."""
        while node in self.parents and not isinstance(node, ast.stmt):
            node = self.parents[node]
        return node

    def ancestors(self, node: ast.AST) -> list[ast.AST]:
        """The nodes around a node (loops, branches, handlers), innermost first, up to its function or lambda."""
        out = []
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                break
            out.append(node)
        return out

    def enclosing_function(self, node: ast.AST) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node
        return None

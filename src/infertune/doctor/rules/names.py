"""IT038: a name the script reads that nothing in it defines (a missing import, a variable never assigned): the
script stops with a NameError where it is read, before or in the middle of its inference."""

from __future__ import annotations

import builtins

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import SCOPES, callee, const, dotted, kw, method, receiver
from infertune.doctor.script import Script

# what a module has without defining it, and what IPython adds to a notebook exported as a script
PROVIDED = set(dir(builtins)) | {
    "__file__",
    "__name__",
    "__doc__",
    "__spec__",
    "__loader__",
    "__package__",
    "__path__",
    "__builtins__",
    "__annotations__",
    "__cached__",
    "display",
    "get_ipython",
    "spark",  # (Databricks notebooks: spark, sc, dbutils are there before the first cell)
    "sc",
    "dbutils",
}
# a file that can bind names the parser cannot see: a star import, exec, globals() written to
DYNAMIC = ("exec", "globals", "locals", "vars", "__import__", "setattr")


def _bound(nodes: list[ast.AST]) -> set[str]:
    out: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.Global | ast.Nonlocal):
            out.update(n.names)
        elif isinstance(n, ast.MatchAs | ast.MatchStar) and n.name:
            out.add(n.name)
        elif isinstance(n, ast.MatchMapping) and n.rest:
            out.add(n.rest)
    return out


def _bound_anywhere(s: Script) -> set[str]:
    if "_bound_anywhere" not in s.__dict__:
        s.__dict__["_bound_anywhere"] = _bound(s.nodes)
    return s.__dict__["_bound_anywhere"]


def _annotations(nodes: list[ast.AST]) -> set[int]:
    """The nodes inside annotations (never evaluated under `from __future__ import annotations`; a missing
    name there is a linter's concern, not a crash of this script's inference)."""
    out: set[int] = set()
    for n in nodes:
        if isinstance(n, ast.arg | ast.AnnAssign) and n.annotation is not None:
            out.update(id(x) for x in ast.walk(n.annotation))
        elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.returns is not None:
            out.update(id(x) for x in ast.walk(n.returns))
    return out


def undefined_name(s: Script):
    yield from _undefined_names(s)
    yield from _locals_read_at_module_level(s)
    yield from undefined_option(s)


def _inner(s: Script) -> set[int]:
    """The nodes inside a function, lambda or class (decorators and defaults too, which only makes the check
    quieter); every other node is evaluated in the module's own scope (comprehensions count as the module's)."""
    inner: set[int] = set()
    for n in s.nodes:  # (walked breadth-first: a parent comes before its children)
        p = s.parents.get(n)
        if p is not None and (isinstance(p, SCOPES) or id(p) in inner):
            inner.add(id(n))
    return inner


def _locals_read_at_module_level(s: Script):
    """A name the module's own code reads that only a function (or class) binds, as its local or parameter: at
    module level it is unbound, a NameError (doctor-real-10 a04: a page's body indented into its loader after the
    return; b06: `model` read at the top, bound only as a parameter further down). One finding, at the first."""
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in s.nodes):
        return
    if any(isinstance(c.func, ast.Name) and c.func.id in DYNAMIC for c in s.calls):
        return
    inner = _inner(s)
    outer = [n for n in s.nodes if id(n) not in inner]
    module = _bound(outer) | {name for n in s.nodes if isinstance(n, ast.Global) for name in n.names} | PROVIDED
    local_only = _bound_anywhere(s) - module
    if not local_only:
        return  # every name is bound at module level somewhere
    reads = [n for n in outer if isinstance(n, ast.Name) and n.id in local_only and isinstance(n.ctx, ast.Load)]
    if reads:
        skip = _annotations(s.nodes)
        reads = sorted((n for n in reads if id(n) not in skip), key=lambda n: (n.lineno, n.col_offset))
    names = list(dict.fromkeys(n.id for n in reads))
    if names:
        yield (
            reads[0],
            f"{', '.join(f'`{x}`' for x in names[:5])}{' ...' if len(names) > 5 else ''} read at module level but "
            "bound only inside a function (its local or parameter): here it is undefined, a NameError",
        )


def _undefined_names(s: Script):
    if any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in s.nodes):
        return
    if any(isinstance(c.func, ast.Name) and c.func.id in DYNAMIC for c in s.calls):
        return
    known = _bound_anywhere(s) | PROVIDED
    missing = [n for n in s.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in known]
    if missing:  # (rare: the annotations are read only then)
        skip = _annotations(s.nodes)
        missing = sorted((n for n in missing if id(n) not in skip), key=lambda n: (n.lineno, n.col_offset))
    names = list(dict.fromkeys(n.id for n in missing))  # first use first
    if names:
        first = next(n for n in missing if n.id == names[0])
        more = " ..." if len(names) > 5 else ""
        yield (
            first,
            f"{', '.join(f'`{x}`' for x in names[:5])}{more} read but never defined or imported in this file: the "
            "script stops here with a NameError",
        )


def _dests(s: Script) -> set[str] | None:
    """Every option the file's argparse parsers define (their namespaces' attributes); None when some may come
    from where the file does not show (parents=, set_defaults, subparsers, options built from variables)."""
    out: set[str] = set()
    for c in s.calls:
        m = method(c)
        if m in ("set_defaults", "add_subparsers") or (m is None and callee(c) == "HfArgumentParser"):
            return None
        if (m or "").startswith("add_") and m not in (
            "add_argument",
            "add_argument_group",
            "add_mutually_exclusive_group",
        ):
            return None  # (jsonargparse's add_class_arguments, ...: options the file does not spell out)
        if m in ("parse_args", "parse_known_args") and kw(c, "namespace") is not None:
            return None  # a namespace that arrives with attributes of its own
        if callee(c) == "ArgumentParser" and kw(c, "parents") is not None:
            return None
        if any(
            isinstance(o, ast.Call) and callee(o) == "ArgumentParser"
            for a in [*c.args, *(k.value for k in c.keywords)]
            for o in s.origins(a)
        ):
            return None  # the parser handed to a helper (`add_model_arg(parser)`: doctor-real-26 b14) gains options
        if m != "add_argument":
            continue
        flags = [a.value for a in c.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(flags) != len(c.args) or any(k.arg is None for k in c.keywords):
            return None
        dest = kw(c, "dest")
        if dest is not None:
            if not isinstance(const(dest), str):
                return None
            out.add(const(dest))
        elif flags:
            name = next((f for f in flags if f.startswith("--")), flags[0])
            out.add(name.lstrip("-").replace("-", "_"))
    return out


def undefined_option(s: Script):
    """`args.x` on argparse's namespace where no parser of the file defines x: an AttributeError (doctor-real-5
    q01: --model defined, args.base_model read)."""
    parses = [c for c in s.calls if method(c) in ("parse_args", "parse_known_args")]
    if not parses or (dests := _dests(s)) is None:
        return
    if not all(any(callee(o) == "ArgumentParser" for o in s.origins(receiver(c))) for c in parses):
        return  # a parser built elsewhere (`parser = build_params()` imported: doctor-real-16 b15) has its own options
    stored = {n.attr for n in s.nodes if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)}
    by_statement: dict[ast.AST, list[ast.Attribute]] = {}
    seen: set[str] = set()
    for n in sorted(
        (x for x in s.nodes if isinstance(x, ast.Attribute) and isinstance(x.ctx, ast.Load)),
        key=lambda x: (x.lineno, x.col_offset),
    ):
        if n.attr.startswith("_") or n.attr in dests | stored | seen or not isinstance(n.value, ast.Name):
            continue
        if s._parsed_args(n.value, 0):
            seen.add(n.attr)  # one finding per option, at its first read; per statement, one for all
            stmt: ast.AST = n
            while stmt in s.parents and not isinstance(stmt, ast.stmt):
                stmt = s.parents[stmt]
            by_statement.setdefault(stmt, []).append(n)
    for attrs in by_statement.values():
        names = ", ".join(f"`{dotted(a)}`" for a in attrs)
        yield (attrs[0], f"{names}: no argparse option of this file defines it, so reading it raises AttributeError")

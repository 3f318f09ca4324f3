"""IT042: a generation's result thrown away in a function or a loop: stored under a name nothing reads before it is
stored again (or the function returns), or left as a bare expression. The generation's time is spent and its answer
lost (doctor-real-2 d23: a helper that generates and returns nothing; doctor-real-6 s04: every file of a folder
transcribed, each result overwritten by the next)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, LOOPS, MULTILINE, SCOPES, callee, kw, lazy_compile, method, receiver
from infertune.doctor.rules.generation import call_options
from infertune.doctor.script import Script

# a timing loop or a warm-up discards its outputs on purpose; a notebook's cell shows its last expression
ON_PURPOSE = lazy_compile(
    r"warm|bench|perf_counter|time\.time|timeit|synchronize|profil|latency|throughput", IGNORECASE
)
NOTEBOOK = lazy_compile(r"^# In\[|get_ipython\(|^# ?%%", IGNORECASE | MULTILINE)


def _produces(s: Script, c: ast.Call) -> bool:
    """A call whose value is the answer: generate (without a streamer, which prints as it goes), a pipeline, or a
    tokenizer's decode of generated ids."""
    if c in s.generates:  # (also a streamer in a **dict: doctor-real-14 b11)
        return "streamer" not in call_options(s, c)[0]
    if method(c) in ("decode", "batch_decode"):
        return s.is_tokenizer(receiver(c))
    if any(isinstance(o, ast.Call) and callee(o) == "Conversation" for a in c.args[:1] for o in s.origins(a)):
        return False  # the conversational pipeline writes its answer into the Conversation it is given
    return bool(s.pipelines) and s.is_pipeline_call(c) and kw(c, "streamer") is None


def _scope(s: Script, node: ast.AST) -> ast.AST:
    fn = s.enclosing_function(node)
    return fn if fn is not None else s.tree


def _blocks(s: Script, node: ast.AST) -> list[ast.AST]:
    """The statements and compound statements holding this node, innermost first, up to its scope."""
    out, n = [], node
    while n in s.parents and not isinstance(n, SCOPES):
        n = s.parents[n]
        out.append(n)
    return out


def _pos(n: ast.AST) -> tuple[int, int]:
    return (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))


def _end(n: ast.AST) -> tuple[int, int]:
    line: int = getattr(n, "end_lineno", 0) or getattr(n, "lineno", 0)
    col: int = getattr(n, "end_col_offset", 0) or 0
    return (line, col)


def _body_of(s: Script, stmt: ast.AST) -> list:
    """The list of statements (a body, an orelse, a handler's body) that holds this statement."""
    parent = s.parents.get(stmt)
    for field in ("body", "orelse", "finalbody", "handlers"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and any(x is stmt for x in block):
            return block
    return []


def _dead(s: Script, target: ast.Name, scope: ast.AST) -> bool:
    """Nothing reads this binding: no load of the name after it before a store that surely runs after it (in its
    own block or one around it), none anywhere in a loop around it (the next pass reads it), none in a nested
    function or a `global` declaration (read at any time)."""
    stmt = s.statement(target)
    chain = [stmt, *_blocks(s, stmt)]
    loops = [b for b in chain if isinstance(b, LOOPS)]
    kill: tuple[int, int] | None = None
    for n in sorted((n for n in ast.walk(scope) if n is not target), key=_pos):
        if isinstance(n, (ast.Global, ast.Nonlocal)) and target.id in n.names:
            return False
        if not (isinstance(n, ast.Name) and n.id == target.id):
            continue
        if isinstance(n.ctx, ast.Load):
            if _scope(s, n) is not scope or any(loop in _blocks(s, n) for loop in loops):
                return False  # read in a nested function, or on the next pass of a loop around it
            if _pos(n) > _pos(target) and (kill is None or _pos(n) < kill):
                return False
        elif kill is None and _pos(n) > _pos(stmt) and _scope(s, n) is scope:
            again = s.statement(n)
            if any(any(x is b for x in _body_of(s, again)) for b in chain):
                # stored again in its own block or one around it: the value is gone once that statement ends
                kill = _end(again)
    return True


def _region(s: Script, stmt: ast.AST, scope: ast.AST) -> str:
    """The source a purpose would be written in: the function around the call, else the loop around it, else the
    statement with its comment line."""
    if scope is s.tree:
        loop = next((b for b in _blocks(s, stmt) if isinstance(b, LOOPS)), None)
        first = _pos(loop or stmt)[0] - (0 if loop else 1)
        last = _end(loop or stmt)[0]
    else:
        first, last = _pos(scope)[0], _end(scope)[0]
    return "\n".join(s.lines[max(first - 1, 0) : last])


def discarded_output(s: Script):
    if NOTEBOOK.search(s.source):
        return
    for c in s.calls:
        if not isinstance(s.parents.get(c), ast.Expr | ast.Assign | ast.Subscript | ast.Attribute) or not _produces(
            s, c
        ):
            continue  # (the call's value goes straight into another expression: it is used)
        stmt, scope = s.statement(c), _scope(s, c)
        if scope is s.tree and not any(isinstance(b, LOOPS) for b in _blocks(s, stmt)):
            continue  # a script's last answer left in a variable: labelled a problem once in six (doctor-real-8 x15)
        if ON_PURPOSE.search(_region(s, stmt, scope)):
            continue
        if isinstance(stmt, ast.Expr) and _value_of(stmt.value) is c:
            yield c, "the generated answer is computed and thrown away: nothing prints, stores or returns it"
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(t := stmt.targets[0], ast.Name)
            and _value_of(stmt.value) is c
            and t.id != "_"
            and _dead(s, t, scope)
        ):
            yield (
                c,
                f"the generated answer is stored in `{t.id}` and nothing reads it afterwards: the generation's time "
                "is spent and its answer lost (return, print or keep it)",
            )


def _value_of(node: ast.AST) -> ast.AST:
    """The call behind `call(...)[0]` / `call(...)["text"]` / `call(...).strip()`."""
    while True:
        if isinstance(node, ast.Subscript):
            node = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Call | ast.Subscript)
            and node.func.attr in ("strip", "split", "lower", "replace", "tolist")
        ):
            node = node.func.value
        else:
            return node

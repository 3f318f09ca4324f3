"""IT050: a Streamlit page that generates before the button asking for it. Streamlit runs the whole script again on
every interaction (a keystroke in a text box, a slider), so a generation at the page's top level runs each time, on
whatever the input holds then (an empty box at first load), while the button only decides whether the result is
shown (doctor-real-10 a12, doctor-real-13 a15: both labelled `other:inference-outside-button`)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import dotted, method
from infertune.doctor.rules.handlers import generation_in, helper_generation
from infertune.doctor.script import Script

BUTTONS = {"button", "form_submit_button"}
GATES = (ast.If, ast.While, ast.For, ast.FunctionDef, ast.AsyncFunctionDef, ast.Try, ast.IfExp)


def _ungated(s: Script, node: ast.AST) -> bool:
    """At the page's top level: under no `if`, loop, function or `try` (a `with st.form(...)` block runs every time)."""
    while node in s.parents:
        node = s.parents[node]
        if isinstance(node, GATES):
            return False
    return True


def _button_binds(s: Script) -> list[ast.Assign]:
    """The assignments of a button's value (`submit = st.button(...)`)."""
    return [
        n for n in s.nodes if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and method(n.value) in BUTTONS
    ]


def _button_names(s: Script) -> set[str]:
    """Names bound to a button's value."""
    return {t.id for n in _button_binds(s) for t in n.targets if isinstance(t, ast.Name)}


def _gated_reads(s: Script, buttons: set[str]) -> set[str]:
    """Names read inside an `if` that tests a button (`if submit:`, `if st.button(...):`)."""
    out: set[str] = set()
    for n in s.nodes:
        if not isinstance(n, ast.If):
            continue
        tested = any(
            (isinstance(x, ast.Name) and x.id in buttons) or (isinstance(x, ast.Call) and method(x) in BUTTONS)
            for x in ast.walk(n.test)
        )
        if tested:
            out |= {x.id for b in n.body for x in ast.walk(b) if isinstance(x, ast.Name)}
    return out


def _generates(s: Script, node: ast.AST) -> bool:
    """A generate or pipeline call in this expression, or a call of a helper of the file that makes one."""
    for c in ast.walk(node):
        if not isinstance(c, ast.Call):
            continue
        if c in s.generates or s.is_pipeline_call(c):
            return True
        if any(generation_in(s, fn) or helper_generation(s, fn) for fn in s.defined(c)):
            return True
    return False


def generation_before_button(s: Script):
    if not s.imports("streamlit") or not s.calls or not any(method(c) in BUTTONS for c in s.calls):
        return
    shown = _gated_reads(s, _button_names(s))
    for stmt in s.nodes:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            continue
        if stmt.targets[0].id not in shown or not _ungated(s, stmt):
            continue
        if _generates(s, stmt.value):
            yield (
                stmt.value,
                f"`{dotted(stmt.targets[0])}` is generated on every rerun of the page (each keystroke or widget "
                "change, and at first load on an empty input) while the button only shows it: generate inside "
                "`if <button>:`",
            )
    yield from _button_never_read(s)


def _button_never_read(s: Script):
    """A button whose value is bound and never read, and a generation at the page's top level after it: the test
    the button was made for is missing, so the page generates on every rerun (doctor-real-14 a03: LangChain's
    Streamlit quickstart with its `if submitted:` dropped)."""
    read = {n.id for n in s.nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unread = [n for n in _button_binds(s) if all(isinstance(t, ast.Name) and t.id not in read for t in n.targets)]
    if not unread:
        return
    first = min(n.lineno for n in unread)
    for stmt in s.nodes:
        if (
            isinstance(stmt, ast.Expr | ast.Assign)
            and stmt.lineno > first
            and _ungated(s, stmt)
            and _generates(s, stmt.value)
        ):
            yield (
                stmt.value,
                f"the button's value (`{dotted(unread[0].targets[0])}`) is never read, so the page generates on "
                "every rerun (each keystroke or widget change, and at first load): generate inside `if <button>:`",
            )

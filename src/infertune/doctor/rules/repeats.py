"""Rules about work done again for nothing: one prompt generated N times in a loop (IT029)."""

from __future__ import annotations

import ast

from infertune.doctor.nodes import IGNORECASE, callee, const, dotted, id_name, lazy_compile
from infertune.doctor.rules.generation import generation_calls
from infertune.doctor.rules.prompts import CHAT_MODEL
from infertune.doctor.script import Script

# a loop that repeats on purpose: timing, warm-up, a benchmark, a retry until the output is valid
MEASURES = lazy_compile(r"time|perf_counter|bench|warm|latency|throughput|retry|attempt|valid|tries", IGNORECASE)


def _names(node: ast.AST) -> set[str]:
    return {dotted(n) for n in ast.walk(node) if isinstance(n, ast.Name | ast.Attribute)} - {""}


def _changed_in(loop: ast.AST) -> set[str]:
    """Names (re)bound inside the loop's body: its target, assignments, `+=`, inner loops' targets."""
    out = set().union(*(_names(g.target) for g in _generators(loop)))
    for n in ast.walk(loop):
        if isinstance(n, ast.Assign):
            out |= set().union(*(_names(t) for t in n.targets))
        elif isinstance(n, ast.AugAssign | ast.AnnAssign | ast.For | ast.comprehension) and n is not loop:
            out |= _names(n.target)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend"):
            out.add(dotted(n.func.value))  # messages.append(...): the conversation grows
    return out


def _generators(loop: ast.AST) -> list[ast.For | ast.comprehension]:
    if isinstance(loop, ast.For):
        return [loop]
    return list(loop.generators) if isinstance(loop, ast.ListComp | ast.GeneratorExp) else []


def _range_count(loop: ast.AST) -> int | str | None:
    """`for _ in range(N)` (a statement or a comprehension's one loop): N as written (a number or a name)."""
    gens = _generators(loop)
    if len(gens) != 1 or not (isinstance(it := gens[0].iter, ast.Call) and callee(it) == "range"):
        return None
    args = it.args
    if len(args) != 1:
        return None
    n = const(args[0])
    return n if isinstance(n, int) else (dotted(args[0]) or None)


def repeated_sampling_calls(s: Script):
    for c, kws, hf, _ in generation_calls(s):
        if not hf or "num_return_sequences" in kws:
            continue
        loop = next((p for p in _ancestors(s, c) if _range_count(p) is not None), None)
        if loop is None or MEASURES.search(ast.unparse(loop)):
            continue
        count = _range_count(loop)
        if isinstance(count, int) and count < 2:
            continue
        inputs = set().union(*(_names(a) for a in [*c.args, *(k.value for k in c.keywords)]))
        if inputs & _changed_in(loop):
            continue  # the input changes between passes (the loop variable, a growing text, a new batch)
        at = getattr(loop, "lineno", 0)
        yield (
            c,
            f"the same input generated {count} times, one call per pass of the loop at line {at}: one "
            f"call with num_return_sequences={count} (and do_sample=True) returns them all in one batch",
        )


def _ancestors(s: Script, node: ast.AST) -> list[ast.AST]:
    """The loops around a node, innermost first, up to its function."""
    out = []
    while node in s.parents:
        node = s.parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            break
        out.append(node)
    return out


# --- IT027: "streaming" by calling generate again on the growing text ----------------------------------------

SHOWS = {"print", "write", "markdown", "yield", "send", "put", "emit"}


def _shows_each_pass(loop: ast.AST) -> bool:
    """The loop hands something out on every pass: yield, print, st.write, a queue or socket send."""
    for n in ast.walk(loop):
        if isinstance(n, ast.Yield | ast.YieldFrom):
            return True
        if isinstance(n, ast.Call) and callee(n) in SHOWS:
            return True
    return False


def regenerate_to_stream(s: Script):
    for g in s.generates:
        n = const(next((k.value for k in g.keywords if k.arg == "max_new_tokens"), None))
        if not isinstance(n, int) or isinstance(n, bool) or n > 16:
            continue
        loop = next((p for p in _ancestors(s, g) if isinstance(p, ast.While | ast.For)), None)
        if loop is None or not _shows_each_pass(loop):
            continue
        inputs = set().union(*(_names(a) for a in [*g.args, *(k.value for k in g.keywords)]))
        if inputs & _changed_in(loop) - (_names(loop.target) if isinstance(loop, ast.For) else set()):
            yield (
                g,
                f"streaming by calling generate for {n} new tokens at a time on the growing text: every call "
                "prefills the whole text again with no KV cache kept (quadratic); pass a TextIteratorStreamer "
                "to one generate call instead",
            )


def beam_no_repeat_ngram_chat(s: Script):
    """Beam search with no_repeat_ngram_size on a chat/instruct model: code, lists, names and markup repeat n-grams
    on purpose, and the ban bends the answer around them."""
    ids = [s.model_id(c) or "" for c in s.loads + s.tokenizers]
    chat = next((i for i in ids if CHAT_MODEL.search(id_name(i))), None)
    if chat is None:
        return
    for _, kws, hf, _ in generation_calls(s):
        beams, ngram = const(kws.get("num_beams")), const(kws.get("no_repeat_ngram_size"))
        if hf and isinstance(beams, int) and beams > 1 and isinstance(ngram, int) and ngram > 0:
            yield (
                kws["no_repeat_ngram_size"],
                f"no_repeat_ngram_size={ngram} with beam search on {chat}, a chat model: it forbids every repeated "
                f"{ngram}-gram (code, lists, names, markup repeat them), so answers get bent or cut; drop it",
            )

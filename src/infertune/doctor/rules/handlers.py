"""Where generation runs inside a function: generate, pipeline and wrapper calls in its body, through the file's
helpers, or handed to a thread (serving.py's IT011/IT022 read these)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, kw, method, receiver
from infertune.doctor.script import Script

OFFLOAD = {"to_thread", "run_in_executor", "run_in_threadpool", "submit", "run_sync", "Thread", "Process"}


def offloaded(s: Script, node: ast.AST) -> bool:
    """Inside a lambda, or an argument of to_thread/run_in_executor/Thread: runs elsewhere."""
    while node in s.parents:
        node = s.parents[node]
        if isinstance(node, ast.Lambda) or (isinstance(node, ast.Call) and callee(node) in OFFLOAD):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
    return False


def _wrapper_call(s: Script, c: ast.Call) -> bool:
    """A call of an object built around a loaded model (`gen = InstructionTextGenerationPipeline(model=model,
    tokenizer=tok)` then `gen(prompt)`, Dolly's documented way; a library's wrapper given `model=`): calling it
    runs the model, as a pipeline does."""
    if not isinstance(c.func, ast.Name):
        return False
    return any(
        isinstance(o, ast.Call)
        and o not in s.loads
        and any(s.models_of(v) for v in [*o.args, *(k.value for k in o.keywords)])
        for o in s.origins(c.func)
    )


# the generation helpers remote-code checkpoints add to their model (Qwen (v1) and Qwen-VL, ChatGLM, InternLM,
# Baichuan, MiniCPM: `model.chat(tokenizer, query, history)`): each runs generate inside, as long as it takes
REMOTE_CHAT = {"chat", "stream_chat", "chat_stream"}


def generation_in(s: Script, fn: ast.AST) -> list[ast.Call]:
    """generate / pipeline calls, calls of a wrapper built on the model, and Thread(target=model.generate),
    directly in this function's body."""
    out = []
    for c in ast.walk(fn):
        if not isinstance(c, ast.Call) or s.enclosing_function(c) is not fn:
            continue
        if (
            c in s.generates
            or s.is_pipeline_call(c)
            or _wrapper_call(s, c)
            or (method(c) in REMOTE_CHAT and bool(s.models_of(receiver(c))))
            or (
                callee(c) in ("Thread", "submit", "run_in_executor", "to_thread")
                and any(isinstance(a, ast.Attribute) and a.attr == "generate" for a in [kw(c, "target"), *c.args])
            )
        ):
            out.append(c)
    return out


def helper_generation(s: Script, fn: ast.AST, depth: int = 0) -> list[tuple[ast.Call, ast.Call, bool]]:
    """(call in fn, generation it leads to, whether a hop ran it in another thread) through helpers of this
    file: called (`helper(...)`, `self.helper(...)`, `engine.helper(...)`) or handed to a thread/executor."""
    out: list[tuple[ast.Call, ast.Call, bool]] = []
    if depth > 2:
        return out
    for c in ast.walk(fn):
        if isinstance(c, ast.Call) and s.enclosing_function(c) is fn:
            helpers = [(h, False) for h in s.defined(c)] + [
                (h, True)
                for a in c.args
                if callee(c) in OFFLOAD and isinstance(a, ast.Name)
                for h in s.functions.get(a.id, [])
            ]
            for h, off in helpers:
                if h is fn:
                    continue
                gens = [(c, g, off) for g in generation_in(s, h)]
                out += gens or [(c, g, off or o) for _, g, o in helper_generation(s, h, depth + 1)]
    return out

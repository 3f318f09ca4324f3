"""Output rules: what comes out of generate or a text-generation pipeline (IT004: the prompt decoded with the
answer; IT045, one row handed to batch_decode, is rules/decoding.py). What goes into them is rules/generation.py."""

from __future__ import annotations

from infertune.doctor import patterns
from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    SEQ2SEQ_ID,
    callee,
    const,
    dotted,
    id_name,
    kw,
    lazy_compile,
    method,
    receiver,
    task_of,
)
from infertune.doctor.rules.completions import chat_input, completion_demo, continues, unknown_completion
from infertune.doctor.rules.generation import encoder_decoder_call, generation_calls, no_text_input, pipe_of, unprompted
from infertune.doctor.rules.prompts import (
    CHAT_MARKERS,
    TEMPLATE_TOKENS,
    literal_continuations,
    literal_texts,
    probe_level,
    prompts_of,
    smoke_probe,
)
from infertune.doctor.script import Script

STRIPS_PROMPT = {
    "split",
    "rsplit",
    "replace",
    "removeprefix",
    "partition",
    "rpartition",
    "find",
    "index",
    "rfind",
    "lstrip",
    "startswith",
    "splitlines",
}


# calls that take the decoded text apart: a length, a processor's own parser (Florence-2's task output), and one
# named for taking the answer out (alpaca-lora's `prompter.get_response`, splitting at "### Response:": doctor-real-14
# d15, labelled so)
PARSERS = {"len", "post_process_generation"}
ANSWER_PARSER = lazy_compile(r"^_?(get|extract|parse|strip|clean|post_?process)_?(the_)?(response|answer|reply)s?$")


def _has_slice(node: ast.AST) -> bool:
    return isinstance(node, ast.Slice) or (
        isinstance(node, ast.Tuple) and any(isinstance(e, ast.Slice) for e in node.elts)
    )


def _raw_output(s: Script, node, depth: int = 0) -> ast.Call | None:
    """The generate call whose full rows (prompt included) this value is, if it is one."""
    if depth > 8 or node is None:
        return None
    if isinstance(node, ast.Subscript):
        return None if _has_slice(node.slice) else _raw_output(s, node.value, depth + 1)
    if isinstance(node, ast.Attribute) and node.attr == "sequences":
        return _raw_output(s, node.value, depth + 1)
    if isinstance(node, ast.Call) and method(node) in ("tolist", "numpy", "detach", "cpu", "squeeze"):
        return _raw_output(s, receiver(node), depth + 1)
    for o in s.origins(node):
        if o in s.generates:  # (from inputs_embeds alone, or from nothing, the output holds only new tokens)
            return None if encoder_decoder_call(s, o) or kw(o, "inputs_embeds") is not None or unprompted(s, o) else o
        if isinstance(o, (ast.ListComp, ast.GeneratorExp)):
            targets = {dotted(t) for g in o.generators for t in ast.walk(g.target)}
            elt = o.elt
            if isinstance(elt, ast.Name) and elt.id in targets:
                return next((r for g in o.generators if (r := _raw_output(s, g.iter, depth + 1))), None)
            if isinstance(elt, (ast.Subscript, ast.Call, ast.Attribute)) and not (
                isinstance(elt, ast.Subscript) and _has_slice(elt.slice)
            ):
                base: ast.expr | None = elt
                while isinstance(base, (ast.Subscript, ast.Attribute)) or (isinstance(base, ast.Call) and method(base)):
                    base = receiver(base) if isinstance(base, ast.Call) else base.value
                if isinstance(base, ast.Name) and base.id in targets:
                    return next((r for g in o.generators if (r := _raw_output(s, g.iter, depth + 1))), None)
        elif isinstance(o, (ast.Subscript, ast.Attribute)) and o is not node:
            r = _raw_output(s, o, depth + 1)
            if r is not None:
                return r
    return None


# role markers that are special tokens (dropped by skip_special_tokens=True); [INST] and <|user|> are plain text in
# Llama 2's and Zephyr's tokenizers, so they survive it
SPECIAL_MARKERS = lazy_compile(r"<\|im_start\|>|<\|im_end\|>|<\|start_header_id\|>|<\|eot_id\|>|<start_of_turn>")
# the markers each template family writes, by model id (a pattern for another family's markers never matches)
FAMILIES = {
    r"qwen|chatml|yi-|openhermes|dolphin": r"<\|im_start\|>|<\|im_end\|>",
    r"llama-?3|meta-llama-3": r"<\|start_header_id\|>|<\|end_header_id\|>|<\|eot_id\|>|<\|begin_of_text\|>",
    r"llama-?2|mistral|mixtral": r"\[/?INST\]|<<SYS>>",
    r"gemma": r"<start_of_turn>|<end_of_turn>",
}


def _family(s: Script) -> str | None:
    """The markers of the script's model's template family, when every model id names the same one."""
    found = {m for i in s.model_ids() for k, m in FAMILIES.items() if patterns.compile(k, IGNORECASE).search(i)}
    return found.pop() if len(found) == 1 else None


def _cannot_match(s: Script, search: ast.Call, skipped: bool) -> bool:
    """A cleanup pattern that looks only for chat-template markers the decoded text cannot hold: special tokens
    dropped by skip_special_tokens=True, or another template family's markers (`[/INST]` for a Llama 3)."""
    pattern = search.args[0] if search.args else kw(search, "pattern")
    texts = [t.replace("\\", "") for _, t in s.strings(pattern)] if pattern is not None else []
    marked = [t for t in texts if TEMPLATE_TOKENS.search(t) or "[/INST]" in t]
    if not marked:
        return False
    if skipped and all(SPECIAL_MARKERS.search(t) for t in marked):
        return True
    own = _family(s)
    return own is not None and not any(patterns.compile(own).search(t) for t in marked)


def _measured(s: Script, n: ast.AST) -> bool:
    parent = s.parents.get(n)
    return isinstance(parent, ast.Call) and callee(parent) == "len"


def prompt_removed(s: Script, node: ast.AST, depth: int = 0, skipped: bool = False) -> bool:
    """Is this text (a decode result, a pipeline's output) cut or searched afterwards: [len(p):], .split(M)[-1]?
    skipped: it was decoded with skip_special_tokens=True (a search for a special token then finds nothing)."""
    if depth > 5:
        return False
    parent = s.parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.attr in STRIPS_PROMPT:
        return True
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return _has_slice(parent.slice) or prompt_removed(s, parent, depth + 1, skipped)
    if isinstance(parent, ast.Attribute) and parent.attr in ("strip", "rstrip", "lower"):
        return prompt_removed(s, up, depth + 1, skipped) if isinstance(up := s.parents.get(parent), ast.Call) else False
    if isinstance(parent, ast.Call) and dotted(parent.func).startswith("re."):
        return not _cannot_match(s, parent, skipped)  # searched (unless for a token decoding dropped)
    if isinstance(parent, ast.Call) and (
        callee(parent) in PARSERS or ANSWER_PARSER.match(callee(parent)) or s.defined(parent)
    ):
        return True  # measured, parsed, or handed to a helper of the file (which may cut it)
    if isinstance(parent, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        names = {dotted(t) for t in targets} - {""}
        uses = s.reads(names)
        if any(not _measured(s, n) for n in uses):  # len(response) logged beside the response itself cuts nothing
            uses = [n for n in uses if not _measured(s, n)]
        if any(prompt_removed(s, n, depth + 1, skipped) for n in uses):
            return True
    if isinstance(parent, ast.Call) and callee(parent) in ("zip", "enumerate"):
        return prompt_removed(s, parent, depth + 1, skipped)  # (each item, beside its prompt or index)
    if isinstance(parent, ast.comprehension | ast.For) and parent.iter is node:  # each item: cut one by one?
        scope = s.parents.get(parent, parent) if isinstance(parent, ast.comprehension) else parent
        items = {n.id for n in ast.walk(parent.target) if isinstance(n, ast.Name)}
        looked = [
            n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id in items and isinstance(n.ctx, ast.Load)
        ]
        if any(prompt_removed(s, n, depth + 1, skipped) for n in looked):
            return True  # (doctor-real-11 b04: `completion[len(prompt):]` for each decoded completion)
    if isinstance(parent, (ast.ListComp, ast.GeneratorExp, ast.comprehension)):
        return prompt_removed(s, parent, depth + 1, skipped)
    if isinstance(parent, ast.Return) and (fn := s.enclosing_function(node)) is not None:
        sites = s.call_sites(fn)  # returned: cut where the helper's result is used?
        return any(prompt_removed(s, c, depth + 1, skipped) for c in sites)
    return False


def _fixed_probe(s: Script, gen: ast.Call) -> bool:
    """A one-shot check at the probe level on prompts written in the file (no chat transcript: "Human: hi\n
    Assistant:" asks for the answer alone), whose decoded output only goes to print(): a person reads the question
    and its answer together (doctor-real-8 y03, labelled so; doctor-real-2 d24's "Hello, world!" to Mistral-Instruct
    was labelled a problem, doctor-real-1 a18 and doctor-real-4 g01, g06, g11 silent)."""
    args = prompts_of(s, gen)
    texts = [x for a in args for x in literal_texts(s, a) or [""]]
    return probe_level(s, gen) and bool(texts) and all(texts) and not any(CHAT_MARKERS.search(x) for x in texts)


def _printed_only(s: Script, c: ast.Call) -> bool:
    """The decoded text goes straight to print(): a console echo, where a copy stored or returned is the output."""
    parent = s.parents.get(c)
    return isinstance(parent, ast.Call) and callee(parent) == "print"


def _unconditional(s: Script, gen: ast.Call) -> bool:
    """Generation from an empty prompt (only the tokenizer's start token): nothing to strip (doctor-real-18 b14)."""
    texts = [literal_texts(s, p) for p in prompts_of(s, gen)]
    return bool(texts) and all(t is not None and not "".join(t).strip() for t in texts)


def _fallback_of_a_cut(s: Script, c: ast.Call, gen: ast.Call) -> bool:
    """A decode in an `except` of a function whose main path cuts the answer out of another decode of the same
    output (`.split(header)[1]` in the `try`, IndexError when the marker is missing): the whole text is only the
    error path's (doctor-real-25 d07)."""
    handler = next((n for n in s.ancestors(c) if isinstance(n, ast.ExceptHandler)), None)
    if handler is None:
        return False
    scope = s.enclosing_function(c) or s.tree
    inside = {id(x) for x in ast.walk(handler)}
    return any(
        isinstance(d, ast.Call)
        and d is not c
        and method(d) in ("decode", "batch_decode")
        and d.args
        and id(d) not in inside
        and _raw_output(s, d.args[0]) is gen
        and prompt_removed(s, d, 0, const(kw(d, "skip_special_tokens")) is True)
        for d in ast.walk(scope)
    )


def prompt_in_output(s: Script):
    by_gen: dict[ast.Call, list[ast.Call]] = {}
    for c in s.calls_method("decode") + s.calls_method("batch_decode"):
        skipped = const(kw(c, "skip_special_tokens")) is True
        if (
            c.args
            and (gen := _raw_output(s, c.args[0])) is not None
            and not prompt_removed(s, c, 0, skipped)
            and not completion_demo(s, c, prompts_of(s, gen))
            and not continues(s, gen)
            and not unknown_completion(s, c)
            and not smoke_probe(s, gen)
            and not _unconditional(s, gen)
            and not no_text_input(s, gen)
            and not _fallback_of_a_cut(s, c, gen)
        ):
            by_gen.setdefault(gen, []).append(c)
    for gen, decodes in by_gen.items():  # one finding per generate: the copy kept (stored, returned) over a print
        kept = [c for c in decodes if not _printed_only(s, c)]
        if not kept and _fixed_probe(s, gen):
            continue
        yield (kept or decodes)[0], "decoding the whole generate output: it starts with the prompt tokens"
    for c, kws, _, opaque in generation_calls(s):
        if completion_demo(s, c, c.args[:1]) or unknown_completion(s, c) or smoke_probe(s, c, kws):
            continue
        if (pipe := pipe_of(s, c)) is None or task_of(pipe) not in ("text-generation", None):
            continue
        if SEQ2SEQ_ID.search(id_name(s.pipeline_model_id(pipe))):
            continue  # (an encoder-decoder's output holds no prompt, whatever the task was left to infer)
        full = kws.get("return_full_text")
        if (full is not None and const(full) is not True) or opaque or not c.args or chat_input(s, c.args[0]):
            continue
        if probe_level(s, c) and literal_continuations(s, c.args[0]):
            continue  # a fixed sentence to finish: prompt plus continuation is the demo's output
        if not prompt_removed(s, c):
            yield (
                c,
                ("a text-generation pipeline returns the prompt with the answer (return_full_text defaults to True)"),
            )

"""Rules about work done again for nothing: one prompt generated N times in a loop (IT029), generate called again
on the growing text to stream (IT027), the same weights loaded twice (IT039); and about repeats forbidden: an
n-gram ban with beam search on a chat model (IT033), or one that reads the prompt (IT048)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import IGNORECASE, callee, const, dotted, id_name, kw, lazy_compile
from infertune.doctor.rules.generation import encoder_decoder_call, generation_calls
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
        at_call: ast.AST = c
        loop = next((p for p in s.ancestors(c) if _range_count(p) is not None), None)
        sampled = const(kws.get("do_sample")) is True
        if loop is None and sampled and (caller := _caller_loop(s, c)) is not None:
            at_call, loop = caller  # (reported at the helper's call, in the loop)
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
            at_call,
            f"the same input generated {count} times, one call per pass of the loop at line {at}: one "
            f"call with num_return_sequences={count} (and do_sample=True) returns them all in one batch",
        )


def _caller_loop(s: Script, c: ast.Call) -> tuple[ast.Call, ast.AST] | None:
    """The generate (sampling) is in a helper called, with nothing or only literals, on every pass of a `range`
    loop: the same input each time (doctor-real-26 b05: `for i in range(10): generar_descripcion()`; a greedy
    helper repeated is a probe printing its one answer, doctor-real-3's shape)."""
    fn = s.enclosing_function(c)
    for site in s.call_sites(fn):
        if all(isinstance(a, ast.Constant) for a in [*site.args, *(k.value for k in site.keywords)]):
            loop = next((p for p in s.ancestors(site) if _range_count(p) is not None), None)
            if loop is not None:
                return site, loop
    return None


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


def _new_tokens(s: Script, g: ast.Call) -> int | None:
    """How many tokens this generate adds: max_new_tokens, or max_length written as the input's length plus a few
    (`max_length=input_ids.shape[1] + 1`: doctor-real-14 b14)."""
    n = s.number(kw(g, "max_new_tokens"))
    cap = kw(g, "max_length")
    if n is None and isinstance(cap, ast.BinOp) and isinstance(cap.op, ast.Add):
        n = const(cap.right)
        n = n if any(isinstance(x, ast.Attribute) and x.attr == "shape" for x in ast.walk(cap.left)) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _fed_back(s: Script, g: ast.Call, loop: ast.AST, inputs: set[str]) -> bool:
    """generate's output becomes its next input in the loop (`input_ids = out.sequences[0].unsqueeze(0)`)."""
    return any(
        isinstance(a, ast.Assign)
        and inputs & set().union(*(_names(t) for t in a.targets))
        and any(isinstance(n, ast.Name) and g in s.origins(n) for n in ast.walk(a.value))
        for a in ast.walk(loop)
    )


def regenerate_to_stream(s: Script):
    for g in s.generates:
        n = _new_tokens(s, g)
        if n is None or n > 16:
            continue
        loop = next((p for p in s.ancestors(g) if isinstance(p, ast.While | ast.For)), None)
        if loop is None:
            continue
        inputs = set().union(*(_names(a) for a in [*g.args, *(k.value for k in g.keywords)]))
        if _fed_back(s, g, loop, inputs):
            yield (
                g,
                f"decoding by calling generate for {n} token{'s' if n > 1 else ''} at a time on its own output: "
                "every call prefills the whole sequence again with no KV cache kept (quadratic); steer one "
                "generate call with a LogitsProcessor, or run the forward passes with past_key_values",
            )
        elif _shows_each_pass(loop) and inputs & _changed_in(loop) - (
            _names(loop.target) if isinstance(loop, ast.For) else set()
        ):
            yield (
                g,
                f"streaming by calling generate for {n} new tokens at a time on the growing text: every call "
                "prefills the whole text again with no KV cache kept (quadratic); pass a TextIteratorStreamer "
                "to one generate call instead",
            )


def beam_no_repeat_ngram_chat(s: Script):
    """Beam search with no_repeat_ngram_size on a chat/instruct model: code, lists, names and markup repeat n-grams
    on purpose, and the ban bends the answer around them."""
    chat = _chat_id(s)
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


def _chat_id(s: Script) -> str | None:
    """The first chat/instruct checkpoint the script loads (a model or its tokenizer)."""
    ids = [s.model_id(c) or "" for c in s.loads + s.tokenizers]
    return next((i for i in ids if CHAT_MODEL.search(id_name(i))), None)


def no_repeat_ngram_prompt(s: Script):
    """no_repeat_ngram_size on a decoder-only model: the ban is read off the whole sequence, and a decoder-only
    model's sequence begins with the prompt (NoRepeatNGramLogitsProcessor is handed input_ids), so no n-gram of the
    prompt may appear in the answer. Size 1 or 2 bans the ordinary words and word pairs of any prompt; size 3 those
    of a conversation's history and template (doctor-real-11 a10: 2 under a persona prompt; doctor-real-12 a02: 2
    on an instruct model; a15: 3 on up to 30 templated messages; all labelled so). Silent: an encoder-decoder,
    whose ban reads its own output only; 3 on a one-line DialoGPT turn (doctor-real-11 a02, labelled fine); beam
    search on a chat model, which IT033 reports."""
    chat = _chat_id(s) is not None
    templated = chat or bool(s.calls_method("apply_chat_template"))
    for c, kws, _, _ in generation_calls(s):  # (the option is transformers' own: no known model needed)
        n, beams = s.number(kws.get("no_repeat_ngram_size")), s.number(kws.get("num_beams"))
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or encoder_decoder_call(s, c):
            continue
        if chat and isinstance(beams, int) and beams > 1:
            continue  # (IT033's)
        if n <= 2 or (n == 3 and templated):
            yield (
                kws["no_repeat_ngram_size"],
                f"no_repeat_ngram_size={n} on a decoder-only model also reads the prompt: no {n}-gram already in "
                "it (the question's words, the history, the template's markers) may appear in the answer; drop it "
                "(repetition_penalty near 1.1 if repeats are a problem)",
            )


# --- IT039: the same weights loaded twice ------------------------------------------------------------------------


def _weights(s: Script) -> list[tuple[ast.Call, str]]:
    """Every load of weights with the checkpoint it reads (its id, and the revision when one is given):
    from_pretrained of a model, and a pipeline given an id rather than a loaded model."""
    out = []
    for c in [*s.loads, *s.pipelines]:
        arg = s.weights_arg(c)
        if c in s.pipelines and (arg is None or s.models_of(arg)):
            continue  # (a pipeline given a loaded model reuses it)
        i = s.model_id(c) if c in s.loads else s.pipeline_model_id(c)
        if any(isinstance(o, ast.JoinedStr | ast.BinOp | ast.Call) for o in s.origins(arg)):
            continue  # an id built at run time (f"facebook/{name}"): which checkpoint it is, the file does not say
        if i is not None:
            rev = kw(c, "revision")
            out.append((c, i + ("@" + ast.unparse(rev) if rev is not None else "")))
    return sorted(out, key=lambda w: (w[0].lineno, w[0].col_offset))


def _exclusive(s: Script, a: ast.AST, b: ast.AST) -> bool:
    """a and b sit in different arms of one if/else or try/except: only one of them runs."""
    arms_a = dict(_chain(s, a))
    for node, arm in _chain(s, b):
        if isinstance(node, ast.If | ast.Try) and node in arms_a:
            return arms_a[node] != arm
    return False


def _chain(s: Script, node: ast.AST) -> list[tuple[ast.AST, int]]:
    """(ancestor, which of its statement lists holds the node), innermost first."""
    out = []
    while node in s.parents:
        parent = s.parents[node]
        arms = [getattr(parent, f, None) for f in ("body", "orelse", "handlers", "finalbody")]
        arm = next((i for i, a in enumerate(arms) if isinstance(a, list) and node in a), -1)
        out.append((parent, arm))
        node = parent
    return out


def _bound(s: Script, c: ast.Call) -> set[str]:
    """The names the statement holding this load binds (`model = X.from_pretrained(...).to("cuda")`)."""
    st = s.statement(c)
    return (
        {n.id for t in st.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        if isinstance(st, ast.Assign)
        else set()
    )


def _dead_after(s: Script, first: ast.Call, second: ast.Call) -> bool:
    """Nothing reads the first copy once the second is loaded: the second rebinds its name, or no line after reads
    it (or `del`s it, or sets it to None, before the second). Two copies both read afterwards are the author's
    plan (a comparison, a draft model), not an oversight."""
    names = _bound(s, first)
    if not names:
        return False  # (handed straight to something: it is used)
    if names & _bound(s, second):  # rebound: dead unless read in between (used, then reloaded to reset its weights)
        start = getattr(s.statement(first), "end_lineno", first.lineno) or first.lineno
        return not any(
            isinstance(n, ast.Name)
            and n.id in names
            and isinstance(n.ctx, ast.Load)
            and start < n.lineno < second.lineno
            for n in s.nodes
        )
    end = getattr(s.statement(second), "end_lineno", second.lineno) or second.lineno
    return not any(
        isinstance(n, ast.Name) and n.id in names and isinstance(n.ctx, ast.Load) and n.lineno > end for n in s.nodes
    )


def _freed_between(s: Script, first: ast.Call, second: ast.Call) -> bool:
    """`del model` (or `model = None`) between the two loads, of a name the first was bound to."""
    names = _bound(s, first)
    for n in s.nodes:
        if not (first.lineno < getattr(n, "lineno", 0) < second.lineno):
            continue
        if isinstance(n, ast.Delete) and names & {dotted(t) for t in n.targets}:
            return True
        if (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and n.value.value is None
            and names & {dotted(t) for t in n.targets}
        ):
            return True
    return False


def weights_loaded_twice(s: Script):
    seen: list[tuple[ast.Call, str]] = []
    for c, i in _weights(s):
        first = next(
            (
                f
                for f, fi in seen
                if fi == i
                and s.enclosing_function(f) is s.enclosing_function(c)
                and not _exclusive(s, f, c)
                and not _freed_between(s, f, c)
                and _dead_after(s, f, c)
            ),
            None,
        )
        seen.append((c, i))
        if first is not None:
            yield (
                c,
                f"the weights of {i} are loaded again (first at line {first.lineno}), and the first copy is never "
                "used after it but still held while this one loads: twice the memory and the load time; reuse the "
                "loaded model (pipeline(task, model=model, tokenizer=tok))",
            )

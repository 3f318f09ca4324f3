"""Decoding rules: what batch_decode is handed (IT045: one row of generate's output); an encoder-decoder's output
decoded with its special tokens (IT055)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, const, has_star_kwargs, kw, receiver
from infertune.doctor.rules.generation import encoder_decoder_call
from infertune.doctor.script import Script


def batch_decode_one_sequence(s: Script):
    """`tok.batch_decode(out[0])` on generate's output: one row is a 1-D list of ids, which batch_decode reads as a
    batch of one-token sequences, returning a list of word pieces instead of the text (doctor-real-6 r11,
    doctor-real-11 a03: both labelled so)."""
    for c in s.calls_method("batch_decode"):
        if not c.args or not s.is_tokenizer(receiver(c)):
            continue
        row = c.args[0]
        if not (isinstance(row, ast.Subscript) and isinstance(const(row.slice), int)):
            continue
        inner = row.value.value if isinstance(row.value, ast.Attribute) and row.value.attr == "sequences" else row.value
        if any(o in s.generates for o in [inner, *s.origins(inner)]):
            yield (
                c,
                "batch_decode is handed one sequence (a row of generate's output): it decodes each id as a sequence "
                "of its own and returns a list of word pieces; use decode(row) or batch_decode(out)",
            )


# calls that clean a decoded text of its markers (Whisper's normalizer, a replace of `<pad>`, a regex, a split)
CLEANUPS = ("replace", "strip", "split", "sub", "normaliz", "clean", "postprocess", "token2json")


PEELED = ("tolist", "cpu", "numpy", "detach", "squeeze")


def _ids_root(node: ast.AST) -> ast.AST:
    """`out[0]`, `out.sequences[0]`, `out[0].tolist()`, `out[0].cpu()` -> `out`."""
    while True:
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.Attribute) and node.attr == "sequences"):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in PEELED:
            node = node.func.value
        else:
            return node


def _cleaned_or_unread(s: Script, decode: ast.Call) -> bool:
    """The decoded text goes through a clean-up, a string method or a call named for one, on the spot or through
    the name it is stored in (doctor-real-1 a01, -5 q12, -7 u01: Whisper's normalizer strips the markers; -18 c15:
    Donut's markers replaced), or is stored and never read (-20 c02: a first decode left unused)."""
    spots: list[ast.AST] = []
    node: ast.AST = decode
    while isinstance(up := s.parents.get(node), ast.Subscript) and up.value is node:
        spots.append(node)
        node = up  # batch_decode(ids)[0]
    spots.append(node)
    parent = s.parents.get(node)
    targets = parent.targets if isinstance(parent, ast.Assign) else []
    names = {t.id for t in targets if isinstance(t, ast.Name)}
    reads = s.reads(names)
    if names and not reads:
        return True
    for spot in [*spots, *reads]:
        up = s.parents.get(spot)
        if isinstance(up, ast.Attribute) and any(w in up.attr.lower() for w in CLEANUPS):
            return True
        call = up if isinstance(up, ast.Call) else None
        if call is not None and spot in call.args and any(w in callee(call).lower() for w in CLEANUPS):
            return True
    return False


def special_tokens_shown(s: Script):
    """An encoder-decoder's generate output decoded without skip_special_tokens: its ids start with the decoder's
    start token (`<pad>` for T5 and Pegasus, `</s>` for BART and Marian) and end with `</s>`, and decode keeps them,
    so the summary or translation shown carries them (doctor-real-8 v04, -11 c04, -15 c03, -16 c04, c08, -23 c09:
    labelled so)."""
    for c in [*s.calls_method("decode"), *s.calls_method("batch_decode")]:
        if not c.args or not s.is_tokenizer(receiver(c)) or kw(c, "skip_special_tokens") is not None:
            continue
        if has_star_kwargs(c):  # (a **dict may hold skip_special_tokens)
            continue
        root = _ids_root(c.args[0])
        gens = [o for o in [root, *s.origins(root)] if o in s.generates]
        if not gens or not all(encoder_decoder_call(s, g) for g in gens) or _cleaned_or_unread(s, c):
            continue
        yield (
            c,
            "an encoder-decoder's output decoded with its special tokens: the text starts with the decoder's start "
            "token (<pad> or </s>) and ends with </s>; pass skip_special_tokens=True",
        )

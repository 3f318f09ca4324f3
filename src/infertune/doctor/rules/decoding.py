"""Decoding rules: what batch_decode is handed (IT045: one row of generate's output)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import const, receiver
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

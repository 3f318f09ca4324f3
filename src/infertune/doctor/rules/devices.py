"""Rules about where the weights live and what that device can compute: fp16 on a CPU (IT031)."""

from __future__ import annotations

import ast

from infertune.doctor.nodes import const, dotted, kw
from infertune.doctor.rules.loading import GPU_INTENT, stays_on_cpu
from infertune.doctor.script import Script

FP16 = {"torch.float16", "torch.half", "float16", "fp16", "half"}


def _fp16(s: Script, value: ast.AST | None) -> bool:
    """The dtype is half precision whatever runs (a literal, not `float16 if cuda else float32`)."""
    found = s.origins(value) if value is not None else []
    return bool(found) and all(dotted(o) in FP16 or const(o) in FP16 for o in found)


def _on_cpu(c: ast.Call) -> bool:
    return const(kw(c, "device_map")) == "cpu" or const(kw(c, "device")) in ("cpu", -1)


def fp16_on_cpu(s: Script):
    gpu = bool(GPU_INTENT.search(s.source))
    for c in [*s.loads, *s.pipelines]:
        value = kw(c, "dtype") or kw(c, "torch_dtype")
        if not _fp16(s, value):
            continue
        if _on_cpu(c) or (not gpu and c in s.loads and stays_on_cpu(s, c)):
            yield (
                value or c,
                "float16 weights on a CPU: most CPUs have no fp16 arithmetic (emulated, often slower than fp32, "
                "some ops unsupported); on a CPU use bfloat16 (AVX512-BF16/AMX) or float32",
            )

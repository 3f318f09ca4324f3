"""Hardware rules: the memory budget given to a card (IT007) and the attention kernel a load asks for (IT009 on
the model, IT021 on the tokenizer)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import (
    IGNORECASE,
    const,
    dotted,
    dtype_keywords,
    has_star_kwargs,
    kw,
    lazy_compile,
    receiver,
)
from infertune.doctor.script import Script

# Memory sizes of common cards, GB as sold (a max_memory equal to one of them is "the whole card").
CARD_SIZES_GB = (8, 12, 16, 24, 32, 40, 48, 80, 94, 96, 141, 180, 192, 288)
MEMORY = lazy_compile(r"\s*([\d.]+)\s*(GiB|GB|G|MiB|MB)\s*", IGNORECASE)


def _size(text: str) -> tuple[float, float] | None:
    """A max_memory string as (the number in G units as written, bytes): '80GiB' -> (80, 85.9e9)."""
    m = MEMORY.fullmatch(str(text))
    if not m:
        return None
    v, unit = float(m.group(1)), m.group(2).lower()
    scale = {"gib": 2**30, "gb": 1e9, "g": 1e9, "mib": 2**20, "mb": 1e6}[unit]
    return (v if unit[0] == "g" else v * scale / 1e9), v * scale


def max_memory_full_card(s: Script):
    for c in s.loads:
        mm = kw(c, "max_memory")
        mm = next((o for o in s.origins(mm) if isinstance(o, ast.Dict)), None) if mm is not None else None
        if mm is None:
            continue
        for k, v in zip(mm.keys, mm.values, strict=True):
            key, size = const(k), _size(const(v)) if isinstance(const(v), str) else None
            if key in ("cpu", "disk") or key is None or size is None:
                continue
            card = s.target.gpu_memory_bytes
            full = size[1] >= 0.9 * card if card else any(abs(size[0] - g) / g < 0.03 for g in CARD_SIZES_GB)
            if card and size[1] > card:
                yield (
                    v,
                    (
                        f"max_memory gives device {key} {const(v)}, more than the {s.target.gpu_name}'s "
                        f"{card / 1e9:.0f} GB"
                    ),
                )
            elif full:
                yield (
                    v,
                    (
                        f"max_memory gives device {key} {const(v)}: the whole card for weights leaves nothing "
                        "for the KV cache and activations"
                    ),
                )


FP32 = {"torch.float32", "torch.float", "float32", "float"}


def _fp32_without_cuda(s: Script, value: ast.AST | None) -> bool:
    """The dtype falls back to fp32 when CUDA is missing (`float16 if torch.cuda.is_available() else float32`):
    that branch is a CPU run, where FlashAttention can neither load (fp32) nor run (no CUDA)."""
    found = s.origins(value) if value is not None else []
    return any(
        isinstance(n, ast.IfExp)
        and "cuda" in ast.unparse(n.test)
        and any(o is n.orelse for o in found)
        and (dotted(n.orelse) in FP32 or const(n.orelse) in FP32)
        for n in s.nodes
    )


def flash_attention(s: Script):
    major = s.target.pinned_major
    for c in s.loads:
        attn = kw(c, "attn_implementation")
        if const(attn) not in ("flash_attention_2", "flash_attention_3"):
            continue
        if const(kw(c, "device_map")) in ("cpu", "mps"):
            yield c, f"FlashAttention needs a CUDA GPU; this model is placed on {const(kw(c, 'device_map'))}"
        dtype, torch_dtype = dtype_keywords(c)
        dt = const(dtype or torch_dtype)
        no_dtype = dtype is None and torch_dtype is None and not has_star_kwargs(c) and not s.quantized(c)
        if dt in ("float32", "float") or (no_dtype and major == 4):
            yield attn, "FlashAttention runs only in fp16/bf16: with fp32 weights it refuses to load"
        elif _fp32_without_cuda(s, dtype or torch_dtype):
            yield (
                attn,
                "FlashAttention is asked for whatever the device, but without CUDA the script falls back to fp32 on "
                "the CPU, where it cannot load: ask for it only when CUDA is there (else 'sdpa')",
            )
        cc = s.target.compute_capability
        if cc is not None and cc < 8.0:
            yield (
                attn,
                (
                    f"FlashAttention 2 needs an Ampere or newer GPU (compute capability 8.0+); "
                    f"{s.target.gpu_name or 'the target'} has {cc:g}"
                ),
            )


def attn_on_tokenizer(s: Script):
    """At the tokenizer's load, or on one of its calls (`tok.apply_chat_template(..., attn_implementation=...)`:
    doctor-real-18 d01): the tokenizer has no attention; the model keeps its default."""
    calls = s.tokenizers + [c for c in s.calls if s.is_tokenizer_call(c) or s.is_tokenizer(receiver(c))]
    for c in dict.fromkeys(calls):
        v = kw(c, "attn_implementation")
        if v is not None:
            yield (v, "attn_implementation given to the tokenizer: it is ignored there; the model keeps its default")

"""Weight storage per quantization method: what each method quantizes and at how many bytes a parameter.

A pre-quantized checkpoint says how it is stored in `quantization_config` (config.json); `--quantization`
overrides it. Which parameter groups (probe/count.py) a method quantizes:
- bitsandbytes, torchao, quanto: Linear layers only. Fused 3D expert tensors are not Linear layers and
  stay at the dtype (per-expert Linear layers are quantized).
- GPTQ, AWQ, compressed-tensors, FP8: every Linear of the blocks and the experts (the checkpoints store
  each expert's projections quantized).
- MXFP4 (gpt-oss): the routed experts only; attention, routers and embeddings stay in the dtype.
- GGUF: every matrix, embeddings included; norms in F32.
Embeddings and lm_head keep the dtype (every method but GGUF skips them by default).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from infertune.core.errors import UserError

BNB_BLOCK = 64  # bitsandbytes 4-bit block size
BNB_DQ_BLOCK = 256  # double quantization: absmax blocks per second-level fp32 constant
MXFP4_BLOCK = 32  # OCP microscaling: 32 FP4 values share one 8-bit (E8M0) scale

Method = Literal[
    "auto", "none", "bnb-int8", "bnb-nf4", "bnb-fp4", "gptq", "awq", "int8", "int4", "fp8", "mxfp4", "gguf"
]


class Quantization(BaseModel):
    """Weight quantization. `auto`: as the checkpoint stores it (its quantization_config, else none)."""

    method: Method = "auto"
    bits: int = 4  # gptq/awq
    group_size: int = 128  # gptq/awq/int4
    double_quant: bool = False  # bnb 4-bit
    gguf_type: str | None = None  # GGML type name (Q4_K, Q8_0, ...): every 2D weight incl. embeddings
    block: list[int] | None = None  # fp8 block scales (DeepSeek-V3: 128 x 128); None: one scale per row
    from_checkpoint: bool = False  # read from the checkpoint's quantization_config

    @property
    def gguf_block(self) -> tuple[int, int]:
        """(weights per block, bytes per block) of the GGML type, from the gguf package's own table."""
        from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

        if self.gguf_type is None:  # as the table lookup would: not a GGUF quantization
            raise KeyError("no GGML type (not a GGUF quantization)")
        return GGML_QUANT_SIZES[GGMLQuantizationType[self.gguf_type]]

    @classmethod
    def parse(cls, text: str | None) -> Quantization:
        """'bnb-nf4', 'bnb-nf4-dq', 'gptq-4bit-g128', 'awq', 'int8', 'int4-g64', 'fp8', 'mxfp4', 'none';
        nothing (or 'auto'): as the checkpoint stores it."""
        if not text or text == "auto":
            return cls()
        if text == "none":
            return cls(method="none")
        if text.lower().startswith("gguf-"):
            return cls._parse_gguf(text[5:])
        parts = text.lower().split("-")
        kw: dict = {}
        if parts[-1] == "dq":
            kw["double_quant"] = True
            parts = parts[:-1]
        for p in list(parts[1:]):
            if p.endswith("bit") and p[:-3].isdigit():
                kw["bits"] = int(p[:-3])
                parts.remove(p)
            elif p.startswith("g") and p[1:].isdigit():
                kw["group_size"] = int(p[1:])
                parts.remove(p)
        method = "-".join(parts)
        try:
            return cls.model_validate({"method": method, **kw})
        except Exception:
            from typing import get_args

            from infertune.core.validate import one_of

            starting = {
                m: m for m in get_args(cls.model_fields["method"].annotation) if m.startswith(method) and method
            }
            if len(starting) > 1:
                one_of("quantization", text, starting, "method")
            raise UserError(
                f"unknown quantization {text!r}; use auto, none, bnb-int8, bnb-nf4[-dq], bnb-fp4[-dq], "
                "gptq[-4bit][-g128], awq[-4bit][-g128], int8, int4[-g128], fp8, mxfp4 or gguf-TYPE (gguf-q4_k_m)"
            ) from None

    @classmethod
    def _parse_gguf(cls, name: str) -> Quantization:
        """'q4_k_m' -> Q4_K: llama.cpp's _S/_M/_L mixes keep a few tensors at a larger type; we use the base."""
        from gguf.constants import GGMLQuantizationType

        t = name.upper()
        for suffix in ("_XS", "_S", "_M", "_L"):
            if t.endswith(suffix) and t not in GGMLQuantizationType.__members__:
                t = t[: -len(suffix)]
        if t not in GGMLQuantizationType.__members__:
            known = ", ".join(
                n.lower() for n in ("Q2_K", "Q3_K", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q8_0", "F16", "BF16")
            )
            raise UserError(f"unknown GGUF type {name!r}; e.g. gguf-{known.replace(', ', ', gguf-')}")
        return cls(method="gguf", gguf_type=t)

    @classmethod
    def from_config(cls, qc: dict | None) -> Quantization:
        """How a pre-quantized checkpoint stores its weights, from config.json's quantization_config."""
        if not qc:
            return cls(method="none")
        m = str(qc.get("quant_method", "")).lower().replace("_", "-")
        kw: dict = {"from_checkpoint": True}
        if m in ("gptq", "awq", "autoround", "auto-round"):
            bits = qc.get("bits") or qc.get("w_bit") or 4
            group = qc.get("group_size") or qc.get("q_group_size") or 128
            return cls(
                method="awq" if m == "awq" else "gptq",
                bits=int(bits),
                group_size=int(group) if int(group) > 0 else 1 << 30,
                **kw,
            )
        if m == "bitsandbytes":
            if qc.get("load_in_8bit"):
                return cls(method="bnb-int8", **kw)
            fp4 = qc.get("bnb_4bit_quant_type") == "fp4"
            dq = bool(qc.get("bnb_4bit_use_double_quant"))
            return cls(method="bnb-fp4" if fp4 else "bnb-nf4", double_quant=dq, **kw)
        if m in ("fp8", "fbgemm-fp8", "finegrained-fp8"):
            block = qc.get("weight_block_size")
            return cls(method="fp8", block=list(block) if block else None, **kw)
        if m == "mxfp4":
            return cls(method="mxfp4", **kw)
        if m == "compressed-tensors":
            return cls._compressed_tensors(qc, kw)
        if m in ("torchao", "quanto", "hqq", "eetq"):
            kind = str(qc.get("quant_type") or qc.get("weights") or qc.get("nbits"))
            return cls(method="int4" if "4" in kind else "int8", **kw)
        raise UserError(
            f"the checkpoint's quantization_config uses {m!r}, which the estimator does not know; "
            "give --quantization to say how the weights are stored"
        )

    @classmethod
    def _compressed_tensors(cls, qc: dict, kw: dict) -> Quantization:
        groups = [g for g in (qc.get("config_groups") or {}).values() if isinstance(g, dict) and g.get("weights")]
        if not groups:
            return cls(method="none", **kw)
        w = groups[0]["weights"]
        bits, kind, strategy = int(w.get("num_bits", 8)), w.get("type", "int"), w.get("strategy", "channel")
        if kind == "float" and bits == 8:
            block = w.get("block_structure") if strategy == "block" else None
            return cls(method="fp8", block=list(block) if block else None, **kw)
        if strategy == "group" and w.get("group_size"):
            return cls(method="gptq", bits=bits, group_size=int(w["group_size"]), **kw)
        return cls(method="int8" if bits == 8 else "int4", bits=bits, **kw)

    def quantizes_experts(self, fused: bool) -> bool:
        if self.method in ("bnb-int8", "bnb-nf4", "bnb-fp4", "int8", "int4"):
            return not fused  # Linear modules only: fused 3D expert tensors keep the dtype
        return self.method != "none"

    def quantizes_linear(self) -> bool:
        return self.method not in ("none", "mxfp4")

    def linear_bytes(self, params: int, rows: int, dtype_bytes: int) -> tuple[float, str]:
        """Bytes of `params` quantized weights (`rows` output rows), and the formula with the numbers in."""
        m, g = self.method, self.group_size
        if m == "none" or m == "auto":
            return params * dtype_bytes, f"{params:,} x {dtype_bytes} B"
        if m == "fp8" and self.block:  # fp8 weight + one fp32 scale per block
            n = self.block[0] * self.block[-1]
            return params * (1 + 4 / n), f"{params:,} x (1 + 4/{n}) B"
        if m in ("bnb-int8", "fp8"):  # int8/fp8 weight + one fp32 scale per output row
            return params + 4 * rows, f"{params:,} x 1 B + {rows:,} rows x 4 B"
        if m == "mxfp4":  # 4-bit values + one byte scale per 32
            return params * (0.5 + 1 / MXFP4_BLOCK), f"{params:,} x (0.5 + 1/{MXFP4_BLOCK}) B"
        if m in ("bnb-nf4", "bnb-fp4"):
            if self.double_quant:  # absmax itself quantized to 8 bits, one fp32 per 256 blocks
                per = 0.5 + 1 / BNB_BLOCK + 4 / (BNB_BLOCK * BNB_DQ_BLOCK)
                return params * per, f"{params:,} x (0.5 + 1/{BNB_BLOCK} + 4/({BNB_BLOCK}x{BNB_DQ_BLOCK})) B"
            return params * (0.5 + 4 / BNB_BLOCK), f"{params:,} x (0.5 + 4/{BNB_BLOCK}) B"
        if m in ("gptq", "awq"):  # packed b-bit weights + per group: fp16 scale and packed b-bit zero
            b = self.bits
            return params * (b / 8 + (2 + b / 8) / g), f"{params:,} x ({b}/8 + (2 + {b}/8)/{g}) B"
        if m == "gguf":
            per, size = self.gguf_block
            return params * size / per, f"{params:,} x {size}/{per} B ({self.gguf_type} blocks)"
        if m == "int8":  # torchao/quanto weight-only: int8 + per-row scale in the compute dtype
            return params + dtype_bytes * rows, f"{params:,} x 1 B + {rows:,} rows x {dtype_bytes} B"
        # int4: packed 4-bit + per group a scale and a zero-point in the compute dtype
        return params * (0.5 + 2 * dtype_bytes / g), f"{params:,} x (0.5 + 2x{dtype_bytes}/{g}) B"


def resolve(q: Quantization, checkpoint_config: dict | None) -> Quantization:
    """`auto` becomes the checkpoint's own format; anything given explicitly stays."""
    return Quantization.from_config(checkpoint_config) if q.method == "auto" else q


def weight_bytes(p, q: Quantization, b: int) -> tuple[float, float, str]:
    """(all weights as stored, the routed experts' share of them, the formula) for profile `p` in dtype `b`."""
    groups = p.param_groups or {}
    n = p.num_parameters or 0
    if q.method == "gguf":  # GGUF stores every matrix (embeddings too) in blocks, norms in F32
        other = groups.get("other", 0)
        mat_b, mat_f = q.linear_bytes(n - other, p.linear_rows or 0, b)
        experts = mat_b * p.expert_params / max(n - other, 1)
        return mat_b + other * 4, experts, f"matrices: {mat_f}; {other:,} norm/bias params x 4 B (F32)"
    linear, experts = p.linear_params, p.expert_params
    # A pre-quantized vision-language checkpoint keeps its vision/audio tower in the dtype (AWQ, GPTQ and
    # llm-compressor recipes leave it out); quantizing at load (bnb, torchao) converts its Linear layers too.
    tower = min(p.tower_parameters, linear) if q.from_checkpoint and not p.is_encoder_decoder else 0
    rows = int((p.linear_rows or 0) * (linear - tower) / max(linear, 1))
    if q.quantizes_linear():
        lin_b, lin_f = q.linear_bytes(linear - tower, rows, b)
    else:
        lin_b, lin_f = (linear - tower) * b, f"{linear - tower:,} x {b} B"
    parts = [f"linear: {lin_f}"] + ([f"tower {tower:,} x {b} B (not quantized in the checkpoint)"] if tower else [])
    lin_b += tower * b
    exp_b = 0.0
    if experts:
        if q.quantizes_experts(p.experts_fused):
            exp_b, exp_f = q.linear_bytes(experts, p.expert_rows, b)
        else:
            exp_b, exp_f = (experts * b, f"{experts:,} x {b} B" + (" (fused 3D: kept)" if q.method != "none" else ""))
        parts.append(f"experts: {exp_f}")
    rest = n - linear - experts
    parts.append(f"other {rest:,} params x {b} B")
    return lin_b + exp_b + rest * b, exp_b, "; ".join(parts)

"""Estimates from a config.json alone: memory breakdown, roofline speed, what fits.

Estimates are their own types (`kind: "estimate"`) and never share a type with measurements.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from infertune.core.errors import UserError
from infertune.core.schema import SCHEMA_VERSION
from infertune.estimate import library
from infertune.estimate.accelerators import Accelerator
from infertune.estimate.bands import band, kind_of
from infertune.estimate.expected import expected_speed
from infertune.estimate.memory import DTYPE_BYTES, EstimateSettings, MemoryEstimate, estimate_memory
from infertune.estimate.placement import Placement, place
from infertune.estimate.quant import Quantization, resolve
from infertune.estimate.speed import DISK_OFFLOAD_Bps, HOST_LINK_Bps, SpeedEstimate, allreduce_s, estimate_speed
from infertune.models.hub import REVISION_DOC
from infertune.probe.model import ModelProfile

CPU_PROCESS_BASELINE_BYTES = 250 * 2**20  # Python + torch + transformers imported (measured ~246-266 MB)


class Fit(BaseModel):
    device: str
    capacity_bytes: int
    needed_bytes: int
    fits: bool
    headroom_bytes: int  # negative: short by this much


class Estimate(BaseModel):
    kind: Literal["estimate"] = "estimate"
    schema_version: str = SCHEMA_VERSION
    model: str
    model_revision: str | None = Field(None, description=REVISION_DOC)
    settings: EstimateSettings
    accelerator: Accelerator
    gpus: int
    max_memory: dict[str, int] | None = None
    memory: MemoryEstimate
    placement: Placement | None = None  # device_map="auto" with max_memory: what lands where
    speed: SpeedEstimate
    fits: dict[str, bool]
    fit_details: list[Fit]
    context_length: int | None = None  # the model's positions (max_position_embeddings or its spelling)
    within_context: bool = True  # input + output within context_length (also fits["context"])
    max_input_len: int | None  # longest prompt that fits with this output length, batch and concurrency
    max_concurrency: int | None  # most concurrent sequences of this shape that fit
    assumptions: list[str]

    def tightest(self) -> Fit | None:
        """The checked device with the least headroom (CPU RAM holding offloaded KV or weights beside a GPU, and
        the disk, are listed without a capacity: they are not checked)."""
        checked = [fd for fd in self.fit_details if fd.capacity_bytes > 0]
        return min(checked, key=lambda fd: fd.headroom_bytes) if checked else None


def _capacity(acc: Accelerator, s: EstimateSettings) -> int:
    if s.platform == "cpu":
        return acc.memory_bytes - CPU_PROCESS_BASELINE_BYTES
    return acc.memory_bytes


def _checked(placed: dict[str, int], s: EstimateSettings) -> dict[str, int]:
    """The shares checked against the device's capacity (CPU RAM holding offloaded KV or weights beside
    a GPU is not, nor is the disk)."""
    return {dev: need for dev, need in placed.items() if dev != "disk" and (dev != "cpu" or s.platform == "cpu")}


def _placed(
    p: ModelProfile, s: EstimateSettings, acc: Accelerator, gpus: int, max_memory: dict[str, int] | None
) -> tuple[MemoryEstimate, dict[str, int], Placement | None]:
    mem = estimate_memory(p, s, p.native_dtype)
    if max_memory and s.platform in ("cuda", "cpu") and s.tp == 1:
        placement = place(
            p, mem, DTYPE_BYTES[s.dtype], gpus if s.platform == "cuda" else 0, acc.memory_bytes, max_memory
        )
        placed = {d.device: d.total_bytes for d in placement.devices}
        if mem.kv_cache_cpu_bytes:
            placed["cpu"] = placed.get("cpu", 0) + mem.kv_cache_cpu_bytes
        return mem, placed, placement
    return mem, per_device(mem, s, gpus), None


def _fits(p: ModelProfile, s: EstimateSettings, acc: Accelerator, gpus: int, max_memory) -> bool:
    try:
        _, placed, _ = _placed(p, s, acc, gpus, max_memory)
    except UserError:  # weights beyond every budget
        return False
    return all(need <= _capacity(acc, s) for need in _checked(placed, s).values())


def _largest(lo: int, hi: int, ok) -> int | None:
    """Largest x in [lo, hi] with ok(x), for ok monotone decreasing; None if not even lo."""
    if not ok(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid - 1)
    return lo


def _context(p: ModelProfile, s: EstimateSettings, limit: int) -> tuple[bool, int]:
    """(within the model's positions, the longest input that leaves room for the output). Decoder-only:
    input + output share the positions. Encoder-decoder: the decoder's positions bound the output and, for
    a learned-position encoder (BART), the encoder's bound the input; T5's relative positions bound nothing."""
    if p.is_encoder_decoder:
        input_cap = limit if not p.encoder_length else p.encoder_length
        return s.max_new_tokens <= limit and (p.encoder_length is not None or s.input_len <= limit), input_cap
    return s.input_len + s.max_new_tokens <= limit, limit - s.max_new_tokens


def tp_rank_bytes(mem: MemoryEstimate, tp: int, plan: str = "auto") -> int:
    """One tensor-parallel rank: 1/tp of the linear weights, of the KV cache (heads split) and of the
    transients (heads and MLP columns split); the replicated weights (embeddings, lm_head, norms), the
    full logits (gathered on every rank) and its own runtime overhead whole. With the MLP-only plan only
    the MLP weights split (mem.sharded_weights_bytes is then theirs): KV and transients stay whole."""
    if plan == "mlp":
        return int(mem.total_bytes - mem.sharded_weights_bytes * (1 - 1 / tp))
    split = mem.sharded_weights_bytes + mem.kv_cache_bytes
    transients = mem.total_bytes - mem.weights_bytes - mem.kv_cache_bytes - mem.logits_bytes - mem.overhead_bytes
    return int(mem.total_bytes - split - transients + (split + max(transients, 0)) / tp)


def per_device(mem: MemoryEstimate, s: EstimateSettings, gpus: int) -> dict[str, int]:
    """Where the bytes land. Tensor parallel: each rank as tp_rank_bytes. Several GPUs otherwise:
    device_map="auto" spreads layers (weights, KV, transients) evenly; each GPU pays its own overhead.
    Offloaded KV lives in CPU RAM."""
    if s.tp > 1 and s.platform == "cuda":
        placed = {f"cuda:{i}": tp_rank_bytes(mem, s.tp, s.tp_plan) for i in range(s.tp)}
    elif s.tp > 1:  # ranks as processes sharing one memory
        placed = {s.platform: tp_rank_bytes(mem, s.tp, s.tp_plan) * s.tp}
    elif s.platform != "cuda":  # one memory: the host's RAM, or Apple's unified memory
        placed = {s.platform: mem.total_bytes}
    else:
        shared = (mem.total_bytes - mem.overhead_bytes) / gpus
        placed = {f"cuda:{i}": int(shared + mem.overhead_bytes) for i in range(gpus)}
    if mem.kv_cache_cpu_bytes:
        placed["cpu"] = placed.get("cpu", 0) + mem.kv_cache_cpu_bytes
    return placed


def estimate(
    p: ModelProfile,
    s: EstimateSettings,
    acc: Accelerator,
    model: str = "",
    gpus: int = 1,
    max_memory: dict[str, int] | None = None,
    model_revision: str | None = None,
) -> Estimate:
    """`max_memory` ({'cuda:0': bytes, 'cpu': bytes}) switches to accelerate's sequential placement."""
    s = s.model_copy(update={"quantization": resolve(s.quantization, p.quantization)})  # auto: as stored
    if s.platform == "cuda" and s.compute_capability is None and acc.compute_capability:
        s = s.model_copy(update={"compute_capability": acc.compute_capability})
    fp8_as_bf16 = library.fp8_dequantized_at_load(s)  # no FP8 tensor cores: transformers 5 loads them as bf16
    if fp8_as_bf16:
        s = s.model_copy(update={"quantization": Quantization(method="none", from_checkpoint=True)})
    mem, placed, placement = _placed(p, s, acc, gpus, max_memory)
    mem.per_device = placed
    host = placement.offloaded_weights_bytes - placement.disk_weights_bytes if placement else 0
    disk = placement.disk_weights_bytes if placement else 0
    speed = estimate_speed(p, mem, s, acc, host, disk)
    extra = host / HOST_LINK_Bps + disk / DISK_OFFLOAD_Bps + allreduce_s(p, s, acc, s.batch * s.concurrency)
    speed.expected = expected_speed(p, mem, s, acc, acc.calibration, extra)
    if fp8_as_bf16:
        speed.expected.factors.append(library.fp8_as_bf16_factor(s))
    moe, quantized = bool(p.expert_params), s.quantization.method not in ("none", "auto")
    speed.kind_ttft = kind_of(s.platform, "ttft", quantized, moe, s.input_len)
    speed.kind_tpot = kind_of(s.platform, "decode", quantized, moe, s.input_len)
    speed.band_ttft, speed.band_tpot = band(speed.kind_ttft), band(speed.kind_tpot)
    cap = _capacity(acc, s)
    fit_details = [
        Fit(device=dev, capacity_bytes=cap, needed_bytes=need, fits=need <= cap, headroom_bytes=cap - need)
        for dev, need in _checked(placed, s).items()
    ]
    for dev in ("cpu", "disk"):  # offloaded KV/weights beside a GPU, or on disk: not in the accelerator table
        if dev in placed and dev != s.platform:
            fit_details.append(Fit(device=dev, capacity_bytes=0, needed_bytes=placed[dev], fits=True, headroom_bytes=0))
    ctx_limit = p.max_position_embeddings or 1 << 20
    in_ctx, input_cap = _context(p, s, ctx_limit)

    def fits_at(n: int) -> bool:
        return _fits(p, s.model_copy(update={"input_len": n}), acc, gpus, max_memory)

    if p.encoder_length:  # a fixed encoder (Whisper's audio frames): the input length is not the user's
        max_in = p.encoder_length if in_ctx and fits_at(p.encoder_length) else None
    else:
        max_in = _largest(1, input_cap, fits_at) if input_cap >= 1 else None
    max_conc = _largest(1, 1 << 16, lambda c: _fits(p, s.model_copy(update={"concurrency": c}), acc, gpus, max_memory))
    assumptions = [
        f"KV cache and compute in {s.dtype}" + (" (quantized KV: see kv_nbits)" if s.kv_cache == "quantized" else ""),
        "prefill of one generate call at a time (batch prompts); KV held for batch x concurrency sequences",
        (
            f"speed.bound is a roofline on {acc.name} ({acc.source}): real runs are slower; speed.expected adds the "
            f"fixed per-step costs and kernel efficiencies ({speed.expected.basis})"
        ),
    ]
    if not in_ctx:
        what = (
            f"output {s.max_new_tokens:,} tokens (input {s.input_len:,})"
            if p.is_encoder_decoder
            else f"input + output = {s.input_len + s.max_new_tokens:,} tokens"
        )
        assumptions.insert(0, f"does not fit the context: {what}, the model is built for {ctx_limit:,} positions")
    if p.is_encoder_decoder:
        assumptions.append(
            f"encoder-decoder: the decoder's cache holds the {s.max_new_tokens} generated tokens; "
            f"cross-attention holds {p.encoder_length or s.input_len:,} encoder positions"
        )
    if p.tower_parameters:
        assumptions.append(f"{p.tower_parameters:,} tower/encoder parameters held in memory, not read by a decode step")
    if s.quantization.method == "gguf":
        assumptions.append(
            "GGUF weights as stored (llama.cpp-style runtimes keep them so); transformers "
            "dequantizes a GGUF checkpoint to the dtype at load: for a transformers run, no quantization"
        )
    if placement and placement.offloaded_weights_bytes > placement.disk_weights_bytes:
        assumptions.append(
            f"{placement.layers_by_device().get('cpu', 0)} layers offloaded to CPU RAM: their weights "
            f"cross the host link every step ({HOST_LINK_Bps / 1e9:.0f} GB/s assumed)"
        )
    if placement and placement.disk_weights_bytes:
        assumptions.append(
            f"{placement.layers_by_device().get('disk', 0)} layers offloaded to disk (from_pretrained "
            f"needs offload_folder): read back every step ({DISK_OFFLOAD_Bps / 1e9:.2f} GB/s assumed)"
        )
    return Estimate(
        model=model,
        model_revision=model_revision,
        settings=s,
        accelerator=acc,
        gpus=gpus,
        max_memory=max_memory,
        memory=mem,
        placement=placement,
        speed=speed,
        fits={f.device: f.fits for f in fit_details} | ({} if in_ctx else {"context": False}),
        fit_details=fit_details,
        context_length=p.max_position_embeddings,
        within_context=in_ctx,
        max_input_len=max_in,
        max_concurrency=max_conc,
        assumptions=assumptions,
    )

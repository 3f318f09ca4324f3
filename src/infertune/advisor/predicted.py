"""Predicted beside measured: the estimate for the exact shape a trial ran, and how close the trial came.

Kept apart from both sides so neither type borrows the other's labels: a trial result stays `measured`,
this comparison is `kind: "estimate-vs-measured"` and every predicted number says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from infertune.estimate import estimate, tp_rank_bytes
from infertune.estimate.accelerators import Accelerator, from_detected_gpu, probe_cpu
from infertune.estimate.bands import describe
from infertune.estimate.memory import EstimateSettings, resolve_dtype
from infertune.estimate.placement import parse_max_memory
from infertune.measure.results import TrialResult, device_of
from infertune.probe.model import profile_model
from infertune.techniques.base import Platform


class EstimateVsMeasured(BaseModel):
    kind: Literal["estimate-vs-measured"] = "estimate-vs-measured"
    device: str
    predicted_peak_memory_bytes: int  # above the process baseline on CPU; allocated on CUDA
    measured_peak_memory_bytes: int
    memory_error: float  # (predicted - measured) / measured
    roofline_ttft_s: float
    roofline_tpot_s: float
    ttft_fraction_of_roofline: float | None  # roofline / measured: 1.0 would be the hardware's limit
    tpot_fraction_of_roofline: float | None
    expected_ttft_s: float | None = None  # the expected figure (roofline + fixed costs + kernel efficiency)
    expected_tpot_s: float | None = None
    tpot_expected_over_measured: float | None = None  # 1.0: the estimate was exact; > 1: the run was faster
    ttft_expected_over_measured: float | None = None
    expected_basis: str | None = None  # calibrated on this host, or datasheet x published factors
    expected_ttft_band: str | None = None  # the band its validation measured for this kind (estimate/bands.py)
    expected_tpot_band: str | None = None
    # CUDA: the other two memory conventions, predicted beside measured (allocated is the pair above)
    predicted_reserved_bytes: int | None = None  # + allocator reserve: torch.cuda.max_memory_reserved
    measured_reserved_bytes: int | None = None
    predicted_device_bytes: int | None = None  # + CUDA context and libraries: NVML / nvidia-smi, this process
    measured_device_bytes: int | None = None
    note: str
    caveats: list[str] = []  # where this comparison is known to be loose, and by how much
    predicted_layers: dict[str, int] | None = None  # device_map: decoder layers per device (estimate)
    measured_layers: dict[str, int] | None = None  # device_map: decoder layers per device, as loaded


def trial_settings(result: TrialResult, native_dtype: str | None, platform: Platform) -> EstimateSettings:
    """The estimator's settings for a finished trial's exact shape (its measured mean prompt length)."""
    cfg, wl, m = result.config, result.workload, result.metrics
    if m is None:
        raise ValueError("a trial without metrics has no shape to estimate")
    dtype = resolve_dtype(cfg.dtype, native_dtype) or "float32"
    attn = cfg.attn_implementation or "sdpa"
    cache = cfg.cache_implementation if cfg.cache_implementation in ("static", "quantized", "offloaded") else "dynamic"
    new_tokens = max(1, round(m.output_tokens / m.requests)) if m.requests else wl.max_new_tokens
    return EstimateSettings(
        dtype=dtype,
        attn=attn,
        kv_cache=cache,
        input_len=round(m.input_tokens_mean),
        max_new_tokens=new_tokens,
        batch=wl.batch,
        platform=platform,
        tp=cfg.tp_size,
        # generate compiles a static cache on CUDA by itself (CUDA graphs)
        compile=platform == "cuda" and cache == "static",
        tp_plan="auto" if cfg.tp_plan == "auto" else "mlp",
    )


def compare(result: TrialResult, accelerator: Accelerator | None = None) -> EstimateVsMeasured | None:
    """The estimate for this trial's shape and hardware; None when the trial has no metrics."""
    m = result.metrics
    if result.status != "ok" or m is None:
        return None
    gpus = ((result.environment or {}).get("hardware") or {}).get("gpus") or []
    on_cuda = m.memory_kind == "cuda_allocated"
    if accelerator is None:
        accelerator = (
            from_detected_gpu(gpus[0]["name"], gpus[0]["total_memory_bytes"], calibrate=True)
            if on_cuda and gpus
            else probe_cpu()
        )
    prof = profile_model(result.model_path, result.config.trust_remote_code)
    s = trial_settings(result, prof.native_dtype, "cuda" if on_cuda else "cpu")
    budgets = parse_max_memory(result.config.max_memory) if result.config.device_map is not None else None
    e = estimate(prof, s, accelerator, model=result.model_path, gpus=max(len(gpus), 1), max_memory=budgets)
    # CPU: RSS above the post-import baseline; CUDA: torch's allocated counter, which excludes the context.
    caveats: list[str] = []
    if e.placement:  # device_map: what the compute device holds (offloaded weights are not there)
        share = next(d for d in e.placement.devices if d.device == e.placement.compute_device)
        predicted = share.total_bytes - (share.overhead_bytes + e.memory.kv_growth_reserve_bytes if on_cuda else 0)
        if not on_cuda and e.placement.disk_weights_bytes:
            caveats.append(
                f"{e.placement.disk_weights_bytes / 2**20:.0f} MiB of weights are read back from disk "
                "through mmap: while mapped, their (reclaimable) pages count in RSS, and each layer's "
                "weights are copied as it runs, so RSS exceeds this estimate by about that or more"
            )
    else:
        total = (
            tp_rank_bytes(e.memory, s.tp, s.tp_plan) if s.tp > 1 else e.memory.total_bytes
        )  # tensor parallel: rank 0
        predicted = total - (e.memory.overhead_bytes + e.memory.kv_growth_reserve_bytes if on_cuda else 0)
    measured = m.peak_memory_generate_bytes - (0 if on_cuda else m.baseline_memory_bytes)
    x = e.speed.expected
    return EstimateVsMeasured(
        device=accelerator.name,
        predicted_peak_memory_bytes=predicted,
        measured_peak_memory_bytes=measured,
        memory_error=(predicted - measured) / measured if measured else 0.0,
        roofline_ttft_s=e.speed.ttft_s,
        roofline_tpot_s=e.speed.tpot_s,
        ttft_fraction_of_roofline=e.speed.ttft_s / m.ttft_s if m.ttft_s else None,
        tpot_fraction_of_roofline=e.speed.tpot_s / m.tpot_s if m.tpot_s else None,
        expected_ttft_s=x.ttft_s if x else None,
        expected_tpot_s=x.tpot_s if x else None,
        tpot_expected_over_measured=x.tpot_s / m.tpot_s if x and m.tpot_s else None,
        ttft_expected_over_measured=x.ttft_s / m.ttft_s if x and m.ttft_s else None,
        expected_basis=x.basis if x else None,
        expected_ttft_band=describe(e.speed.band_ttft, e.speed.kind_ttft) if x else None,
        expected_tpot_band=describe(e.speed.band_tpot, e.speed.kind_tpot) if x else None,
        predicted_reserved_bytes=predicted + e.memory.allocator_reserve_bytes if on_cuda else None,
        measured_reserved_bytes=m.peak_memory_reserved_bytes if on_cuda else None,
        predicted_device_bytes=predicted + e.memory.allocator_reserve_bytes + e.memory.cuda_context_bytes
        if on_cuda
        else None,
        measured_device_bytes=m.device_memory_process_bytes if on_cuda else None,
        note="roofline = the device's limit for this shape (estimate); fraction = roofline / measured; "
        "expected = what this shape should measure (estimate); expected/measured = 1 is exact",
        caveats=caveats,
        predicted_layers=e.placement.layers_by_device() if e.placement else None,
        measured_layers=layers_by_device(m.placement, prof.num_layers) if m.placement else None,
    )


def layers_by_device(hf_device_map: dict[str, str], num_layers: int) -> dict[str, int]:
    """Decoder layers per device in a loaded model's hf_device_map (module prefixes, longest wins)."""
    out: dict[str, int] = {}
    for i in range(num_layers):
        dev = device_of(hf_device_map, f"model.layers.{i}")
        if dev is not None:
            out[dev] = out.get(dev, 0) + 1
    return out


class Measurement(TrialResult):
    """What `measure` reports: the trial (measured) and the estimate for its exact shape beside it."""

    estimate: EstimateVsMeasured | None = None

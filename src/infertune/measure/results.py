"""What a trial measured. These types are *measurements* (`kind: "measured"`); estimates live elsewhere
and never share a type with them."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from infertune.core.config import InferenceConfig
from infertune.core.schema import SCHEMA_VERSION
from infertune.core.workload import Workload
from infertune.measure.machine import MachineLoad
from infertune.models.hub import REVISION_DOC

Status = Literal["ok", "oom", "error", "timeout"]
Finish = Literal["eos", "length"]  # a request ended on EOS or at max_new_tokens


class RankMemory(BaseModel):
    rank: int
    peak_memory_bytes: int  # this rank's peak, counted as memory_kind says


class TrialMetrics(BaseModel):
    """Timed numbers exclude warmup calls; memory peaks include them (a warmup that OOMs is a real OOM).

    Memory is in bytes. `memory_kind` says what was counted: `cpu_rss` (the child's resident set, which
    includes the ~250 MB of the Python/torch runtime, reported separately as `baseline_memory_bytes`) or
    `cuda_allocated` (torch.cuda.max_memory_allocated; the allocator's reserved peak and NVML's device
    figures, which include the CUDA context, are beside it so that every convention compares).
    """

    memory_kind: Literal["cpu_rss", "cuda_allocated"]
    peak_memory_method: Literal["vmhwm", "rss_sampler", "cuda_max_allocated"] | None = Field(
        None,
        description="how the peak was read: vmhwm (the trial process's own kernel high-water mark, "
        "reset when it starts measuring; Linux), rss_sampler (RSS sampled every 2 ms), "
        "cuda_max_allocated (torch.cuda.max_memory_allocated); null in results from before this field",
    )
    load_s: float = Field(description="from_pretrained wall time, tokenizer excluded")
    baseline_memory_bytes: int = Field(description="memory in use before the model load")
    peak_memory_bytes: int = Field(description="peak over the whole trial (load and generation)")
    peak_memory_load_bytes: int = Field(description="peak up to the end of the model load")
    peak_memory_generate_bytes: int = Field(description="peak during the generate calls")
    peak_memory_reserved_bytes: int | None = Field(
        None, description="CUDA caching allocator's reserved peak (torch.cuda.max_memory_reserved)"
    )
    device_memory_process_bytes: int | None = Field(
        None,
        description="CUDA: this process's memory on the GPU as NVML (nvidia-smi) counts it, context and "
        "libraries included, at the end of generation (needs nvidia-ml-py)",
    )
    device_memory_used_bytes: int | None = Field(
        None, description="CUDA: the whole GPU's used memory as NVML counts it (all processes), end of generation"
    )
    cpu_peak_rss_bytes: int = Field(description="the child's own peak RSS (never its parent's), whatever the device")
    weights_bytes: int = Field(description="model.get_memory_footprint() after load")
    ttft_s: float = Field(description="time to first token, mean over timed requests")
    ttft_p50_s: float
    ttft_p95_s: float
    tpot_s: float | None = Field(description="time per output token after the first: mean inter-token gap")
    tpot_p50_s: float | None
    tpot_p95_s: float | None
    e2e_s: float = Field(description="request end-to-end latency (to its last token), mean")
    e2e_p50_s: float
    e2e_p95_s: float
    tokens_per_s: float = Field(description="output tokens of all timed requests / their total generate time")
    output_tokens: int = Field(description="output tokens of all timed requests")
    input_tokens_mean: float
    requests: int = Field(description="timed requests (prompts x repeats, batches filled by cycling)")
    generate_calls: int
    reference_nll: float | None = Field(None, description="teacher-forced mean NLL (nats/token) on the reference text")
    concurrency: int = Field(1, description="requests arriving together (a burst) per round")
    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = Field(None, description="p99 inter-token latency (ITL)")
    e2e_p99_s: float | None = None
    requests_per_s: float | None = Field(None, description="timed requests / their total wall time")
    per_rank: list[RankMemory] | None = Field(
        None, description="tensor parallel: each rank's peak (peak_memory_bytes is the largest of them)"
    )
    peak_memory_sum_bytes: int | None = Field(None, description="tensor parallel: all ranks' peaks together")
    placement: dict[str, str] | None = Field(
        None, description="device_map: where each module landed (hf_device_map), as loaded"
    )
    layer_forward_s: dict[str, float] | None = Field(
        None,
        description="device_map: median time of one decoder layer's forward, by where its weights live "
        "(offloaded layers include bringing their weights back)",
    )
    pass_s: list[float] | None = Field(
        None, description="wall time of each timed pass (repeat): their spread is the run-to-run noise within the trial"
    )
    offload_slowdown: float | None = Field(
        None, description="device_map: median offloaded layer forward / median resident one (measured)"
    )


class RequestOutput(BaseModel):
    prompt_index: int
    input_tokens: int
    output_token_ids: list[int]
    text: str
    finish: Finish


class TrialSpec(BaseModel):
    """What the parent hands the trial child."""

    config: InferenceConfig
    workload: Workload
    model_path: str
    reference_text: str | None = None  # scored teacher-forced after generation (quality checks)
    logprobs_path: str | None = None  # where the reference's next-token log-probs go (float32 .npy)
    memory_limit_bytes: int | None = None  # the most the trial may allocate after start-up (worker.limit_memory)


class TrialResult(BaseModel):
    kind: Literal["measured"] = "measured"
    schema_version: str = SCHEMA_VERSION
    status: Status
    error: str | None = None
    error_type: str | None = Field(None, description="'input' when the workload itself was invalid")
    config: InferenceConfig
    workload: Workload
    model_path: str
    model_revision: str | None = Field(None, description=REVISION_DOC)
    device: str | None = None
    metrics: TrialMetrics | None = None
    outputs: list[RequestOutput] = Field(default_factory=list)
    environment: dict[str, Any] | None = None
    machine: MachineLoad | None = Field(
        None, description="how busy the machine was while the trial ran (measured beside it by the parent)"
    )
    duration_s: float | None = None
    log_tail: str | None = None


def device_of(hf_device_map: dict[str, Any], module: str) -> str | None:
    """Where `module` lives in a loaded model's hf_device_map (keys are module prefixes, the longest wins;
    "" is the whole model); GPU indices as cuda:N."""
    key = max((k for k in hf_device_map if k == "" or module == k or module.startswith(k + ".")), key=len, default=None)
    if key is None:
        return None
    dev = str(hf_device_map[key])
    return f"cuda:{dev}" if dev.isdigit() else dev

"""The measurement core every trial mode shares: load the model (timed, memory metered), one timed
`generate` call, the requests recorded from the timed calls, and the metrics they add up to.

The modes (`single`, `concurrent`, `continuous`; `parallel` for tensor-parallel ranks) only decide which
calls run when; `worker` puts them together in the trial's child process.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from infertune.core.config import InferenceConfig
from infertune.measure.lifeline import TRIAL_DIR_ENV
from infertune.measure.memory import CpuMeter, CudaMeter, meter_for
from infertune.measure.offload import LayerTimer
from infertune.measure.parallel import RANK, WORLD, rank_cuda_device, resolved_plan
from infertune.measure.results import Finish, RankMemory, RequestOutput, TrialMetrics, TrialSpec


def emit(**event: Any) -> None:
    """Progress for the parent; under tensor parallelism only rank 0 speaks (the ranks run in lockstep)."""
    if RANK == 0:
        print(json.dumps({"event": event.pop("event"), **event}), flush=True)


class StepTimer:
    """A `generate` streamer that only records when each decoding step's tokens arrive.

    generate() calls put() once with the prompt, then once per step with that step's tokens (one per
    row). The tokens are already on the CPU then, so each timestamp is after the device finished the step.
    """

    def __init__(self) -> None:
        self.steps: list[float] = []
        self._prompt_seen = False

    def put(self, value: Any) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.steps.append(time.perf_counter())

    def end(self) -> None:
        pass


def resolve_device(config: InferenceConfig) -> str:
    import torch

    if config.device:
        return config.device
    if torch.cuda.is_available():
        return rank_cuda_device() if WORLD > 1 else "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def limit_memory(device: str, limit: int) -> None:
    """The most this trial may allocate beyond what it holds now (Python, torch, the CUDA context):
    on CUDA the caching allocator's per-process fraction of the device; elsewhere the address-space limit
    (RLIMIT_AS) of this process, so an allocation past it fails (MemoryError) instead of swapping."""
    import torch

    if device.startswith("cuda"):
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, limit / total), device)
        return
    import resource

    with open("/proc/self/statm", encoding="ascii") as f:  # address space now, in pages
        now = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (now + limit, now + limit))


def _fault_in(model: Any) -> None:
    """Touch one element per page of every weight. On CPU, safetensors weights are mmapped views of the
    file, resident only once read: without this the load peak misses them and the first prompt's peak
    misses the untouched rows of the embedding (tied to lm_head, read only after the last layer)."""
    import torch

    with torch.no_grad():
        for t in model.state_dict().values():
            t = getattr(t, "_local_tensor", t)  # tensor parallel: a DTensor's own shard is what this rank holds
            if t.device.type == "cpu" and t.numel():
                t.reshape(-1)[:: max(1, 4096 // t.element_size())].float().sum()


@dataclass
class Loaded:
    """The model as loaded for the trial, and what loading it cost."""

    cfg: InferenceConfig  # the tp_plan 'mlp' resolved to this model's plan keys
    device: str
    meter: CpuMeter | CudaMeter
    baseline: int
    tok: Any
    model: Any
    load_s: float
    peak_load: int
    placement: dict[str, str] | None = None  # device_map: module prefix -> device
    layers: LayerTimer | None = None
    offload_dir: Any = None  # a TemporaryDirectory for weights a device_map sends to disk


def load(spec: TrialSpec) -> Loaded:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    cfg = spec.config
    device = resolve_device(cfg)
    meter: CpuMeter | CudaMeter = meter_for(device)
    baseline = meter.current()
    if spec.memory_limit_bytes is not None:
        limit_memory(device, spec.memory_limit_bytes)

    emit(event="phase", phase="load")
    tok = AutoTokenizer.from_pretrained(spec.model_path, trust_remote_code=cfg.trust_remote_code)
    cfg = resolved_plan(cfg, spec.model_path)
    load_kw = cfg.from_pretrained_kwargs(device)
    offload_dir = None
    if cfg.device_map is not None and "offload_folder" not in load_kw:  # budgets may send weights to disk
        import tempfile

        offload_dir = tempfile.TemporaryDirectory(prefix="infertune-offload-", dir=os.environ.get(TRIAL_DIR_ENV))
        load_kw["offload_folder"] = offload_dir.name
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(spec.model_path, **load_kw)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    else:
        _fault_in(model)
    load_s = time.perf_counter() - t0
    m = Loaded(cfg, device, meter, baseline, tok, model, load_s, meter.load_peak(), offload_dir=offload_dir)
    model.eval()
    if cfg.device_map is not None:  # what landed where (one device: accelerate keeps no map), and its cost
        m.placement = {k: str(v) for k, v in (getattr(model, "hf_device_map", None) or {"": model.device}).items()}
        m.layers = LayerTimer(model, m.placement, device.startswith("cuda"))
    return m


def _pstats(values: list[float]) -> tuple[float, float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 95))


def _row_lengths(gen: Any, eos_ids: set[int], ignore_eos: bool) -> list[tuple[int, Finish]]:
    """Generated tokens per row, up to and including the first EOS (what a user receives)."""
    rows: list[tuple[int, Finish]] = []
    for row in gen.tolist():
        first_eos = None if ignore_eos else next((i for i, t in enumerate(row) if t in eos_ids), None)
        rows.append((len(row), "length") if first_eos is None else (first_eos + 1, "eos"))
    return rows


class Session:
    """The workload on the loaded model: its encoded prompts, one timed generate call, and the requests
    recorded from the timed calls (each timed from when it arrived, queueing included)."""

    def __init__(self, m: Loaded, spec: TrialSpec) -> None:
        from infertune.measure.prompts import encode_prompt

        wl, self.m, self.wl = spec.workload, m, spec.workload
        self.encoded = [encode_prompt(m.tok, p, wl.input_len_of(i), i) for i, p in enumerate(wl.prompt_list())]
        eos = m.model.generation_config.eos_token_id
        self.eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
        self.pad_id = m.tok.pad_token_id if m.tok.pad_token_id is not None else next(iter(self.eos_ids), 0)
        self.gen_kwargs: dict[str, Any] = {
            "max_new_tokens": wl.max_new_tokens,
            "do_sample": wl.do_sample,
            "pad_token_id": self.pad_id,
            **m.cfg.generation_kwargs(),
        }
        if wl.ignore_eos:
            self.gen_kwargs["min_new_tokens"] = wl.max_new_tokens
        if not wl.do_sample:  # drop the checkpoint's sampling defaults, which would only warn under greedy
            self.gen_kwargs.update(temperature=None, top_p=None, top_k=None)
        self.ttft: list[float] = []
        self.e2e: list[float] = []
        self.gaps: list[float] = []
        self.lengths: list[int] = []
        self.total_time, self.total_out = 0.0, 0
        self.call_s: list[float] = []  # each timed call's (or round's) wall time
        self.outputs: dict[int, RequestOutput] = {}

    def generate(self, seqs: list[list[int]]):
        """One generate call; (start, end, per-step times, generated ids)."""
        import torch

        model, pad_id = self.m.model, self.pad_id
        width = max(len(x) for x in seqs)
        # Left padding: decoder-only models continue from the last position of every row.
        input_ids = torch.tensor([[pad_id] * (width - len(x)) + x for x in seqs], device=model.device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in seqs], device=model.device)
        timer = StepTimer()
        torch.manual_seed(self.wl.seed)
        start = time.perf_counter()
        out = model.generate(input_ids=input_ids, attention_mask=mask, streamer=timer, **self.gen_kwargs)
        if self.m.device.startswith("cuda"):
            torch.cuda.synchronize(self.m.device)
        return start, time.perf_counter(), timer.steps, out[:, width:].cpu()

    def record(self, i: int, seq: list[int], ids: list[int], steps: list[float], t0: float, finish: Finish) -> None:
        """One timed request: times from `t0`, when it arrived (queueing included)."""
        self.ttft.append(steps[0] - t0)
        self.e2e.append(steps[-1] - t0)
        self.gaps.extend(np.diff(steps).tolist())
        self.lengths.append(len(seq))
        self.total_out += len(ids)
        if i not in self.outputs:
            text = self.m.tok.decode(ids, skip_special_tokens=True)
            self.outputs[i] = RequestOutput(
                prompt_index=i, input_tokens=len(seq), output_token_ids=ids, text=text, finish=finish
            )

    def record_call(
        self, idx: list[int], seqs: list[list[int]], steps: list[float], gen: Any, t0s: list[float]
    ) -> None:
        """The rows of one generate call; `t0s`: each row's arrival time."""
        rows = _row_lengths(gen, self.eos_ids, self.wl.ignore_eos)
        for row, (i, (n, finish)) in enumerate(zip(idx, rows, strict=True)):
            self.record(i, seqs[row], gen[row, :n].tolist(), steps[:n], t0s[row], finish)

    def metrics(
        self,
        generate_peak: int,
        cpu_peak: int,
        peak: int,
        per_rank: list[int] | None,
        calls: int,
        layer_s: dict[str, float] | None,
        slowdown: float | None,
        nll: float | None,
    ) -> TrialMetrics:
        m, wl = self.m, self.wl
        ttft, e2e, gaps, total_time = self.ttft, self.e2e, self.gaps, self.total_time
        ttft_m = _pstats(ttft)
        e2e_m = _pstats(e2e)
        tpot_m = _pstats(gaps) if gaps else (None, None, None)
        p99 = {k: float(np.percentile(v, 99)) if v else None for k, v in (("ttft", ttft), ("tpot", gaps), ("e2e", e2e))}
        return TrialMetrics(
            memory_kind=m.meter.kind,
            peak_memory_method=m.meter.method,
            load_s=m.load_s,
            baseline_memory_bytes=m.baseline,
            peak_memory_bytes=max(per_rank) if per_rank else peak,
            peak_memory_load_bytes=m.peak_load,
            peak_memory_generate_bytes=generate_peak,
            peak_memory_reserved_bytes=m.meter.reserved_peak(),
            device_memory_process_bytes=getattr(m.meter, "process_used", None),  # NVML, CUDA only
            device_memory_used_bytes=getattr(m.meter, "device_used", None),
            cpu_peak_rss_bytes=cpu_peak,
            weights_bytes=int(m.model.get_memory_footprint()),
            ttft_s=ttft_m[0],
            ttft_p50_s=ttft_m[1],
            ttft_p95_s=ttft_m[2],
            tpot_s=tpot_m[0],
            tpot_p50_s=tpot_m[1],
            tpot_p95_s=tpot_m[2],
            e2e_s=e2e_m[0],
            e2e_p50_s=e2e_m[1],
            e2e_p95_s=e2e_m[2],
            tokens_per_s=self.total_out / total_time if total_time > 0 else 0.0,
            output_tokens=self.total_out,
            input_tokens_mean=float(np.mean(self.lengths)),
            requests=len(ttft),
            generate_calls=calls - wl.warmup,
            reference_nll=nll,
            concurrency=wl.concurrency,
            ttft_p99_s=p99["ttft"],
            tpot_p99_s=p99["tpot"],
            e2e_p99_s=p99["e2e"],
            requests_per_s=len(ttft) / total_time if total_time > 0 else None,
            per_rank=[RankMemory(rank=r, peak_memory_bytes=b) for r, b in enumerate(per_rank)] if per_rank else None,
            peak_memory_sum_bytes=sum(per_rank) if per_rank else None,
            placement=m.placement,
            layer_forward_s=layer_s or None,
            offload_slowdown=slowdown,
            pass_s=pass_times(self.call_s, wl.repeats),
        )


def pass_times(call_s: list[float], repeats: int) -> list[float]:
    """Wall time of each timed pass (every prompt once, or one round): the timed calls, `repeats` passes."""
    k = max(1, len(call_s) // max(1, repeats))
    return [sum(call_s[i * k : (i + 1) * k]) for i in range(len(call_s) // k)]

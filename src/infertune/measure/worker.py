"""The trial child process: load the model once, run the workload, write one JSON result.

Run as `python -m infertune.measure.worker SPEC.json RESULT.json`. Progress goes to stdout as JSON
lines (`{"event": ...}`); anything else there (library chatter) is ignored by the parent. The result
file is written atomically, so the parent sees either a whole result or none (a crash).
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
import traceback
from typing import Any

import numpy as np

from infertune.config import InferenceConfig
from infertune.errors import UserError
from infertune.measure.memory import CpuMeter, CudaMeter, meter_for, peak_rss_bytes
from infertune.measure.results import RequestOutput, TrialMetrics, TrialSpec, device_of
from infertune.paths import write_json_atomic


RANK = int(os.environ.get("RANK", "0"))  # under torchrun (tensor parallel): this process's rank
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


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
        if WORLD > 1:  # one device per rank
            local = int(os.environ.get("LOCAL_RANK", "0"))
            torch.cuda.set_device(local)
            return f"cuda:{local}"
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def environment() -> dict[str, Any]:
    import torch

    from infertune.probe.hardware import detect_hardware
    from infertune.probe.versions import library_versions

    return {
        "hardware": detect_hardware().model_dump(),
        "libraries": library_versions(),
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
    }


def _pstats(values: list[float]) -> tuple[float, float, float]:
    a = np.asarray(values, dtype=float)
    return float(a.mean()), float(np.percentile(a, 50)), float(np.percentile(a, 95))


def _row_lengths(gen: Any, eos_ids: set[int], ignore_eos: bool) -> list[tuple[int, str]]:
    """Generated tokens per row, up to and including the first EOS (what a user receives)."""
    rows = []
    for row in gen.tolist():
        first_eos = None if ignore_eos else next((i for i, t in enumerate(row) if t in eos_ids), None)
        rows.append((len(row), "length") if first_eos is None else (first_eos + 1, "eos"))
    return rows


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


class LayerTimer:
    """Wall time of each decoder layer's forward, grouped by where the layer's weights live (device_map).

    Hooks on the layer modules wrap accelerate's own hook, so an offloaded layer's time includes bringing
    its weights back from CPU RAM or disk. On CUDA, events on the stream time the layers without forcing a
    synchronisation at every layer (which would change what is measured)."""

    def __init__(self, model: Any, where: dict[str, str], cuda: bool) -> None:
        """`where`: the loaded model's hf_device_map (module prefix -> device)."""
        import re

        import torch

        self.samples: dict[str, list[Any]] = {}
        self.cuda = cuda
        for name, module in model.named_modules():
            if not re.search(r"\.layers\.\d+$", name):
                continue
            dev = device_of(where, name)
            if dev is None:
                continue
            calls = self.samples.setdefault(dev, [])

            def pre(mod: Any, args: Any, calls: list = calls) -> None:
                if cuda:
                    ev = torch.cuda.Event(enable_timing=True)
                    ev.record()
                    calls.append([ev, None])
                else:
                    calls.append([time.perf_counter(), None])

            def post(mod: Any, args: Any, out: Any, calls: list = calls) -> None:
                if cuda:
                    ev = torch.cuda.Event(enable_timing=True)
                    ev.record()
                    calls[-1][1] = ev
                else:
                    calls[-1][1] = time.perf_counter()

            module.register_forward_pre_hook(pre)
            module.register_forward_hook(post)

    def times(self) -> dict[str, list[float]]:
        """Seconds per layer forward, by the device its weights live on."""
        import torch

        if self.cuda:
            torch.cuda.synchronize()
        return {dev: [a.elapsed_time(b) / 1e3 if self.cuda else b - a for a, b in calls if b is not None]
                for dev, calls in self.samples.items()}


def layer_timing(times: dict[str, list[float]], compute: str) -> tuple[dict[str, float], float | None]:
    """Median layer forward per device, and the offload slowdown: the median forward of layers whose
    weights live off the compute devices (CPU RAM beside a GPU, or disk) over the median of resident
    layers (None when nothing is offloaded, or nothing resident)."""
    medians = {dev: float(np.median(t)) for dev, t in times.items() if t}
    on = [x for dev, t in times.items() if dev == compute or dev.startswith("cuda") for x in t]
    off = [x for dev, t in times.items() if not (dev == compute or dev.startswith("cuda")) for x in t]
    return medians, float(np.median(off) / np.median(on)) if on and off else None


def run(spec: TrialSpec) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from infertune.measure.prompts import encode_prompt

    hf_logging.disable_progress_bar()
    cfg, wl = spec.config, spec.workload
    device = resolve_device(cfg)
    meter: CpuMeter | CudaMeter = meter_for(device)
    baseline = meter.current()
    if spec.memory_limit_bytes is not None:
        limit_memory(device, spec.memory_limit_bytes)

    emit(event="phase", phase="load")
    tok = AutoTokenizer.from_pretrained(spec.model_path, trust_remote_code=cfg.trust_remote_code)
    if cfg.tp_plan == "mlp":  # the MLP-only plan, as overrides of this model's own plan keys
        from infertune.probe.model import mlp_only_tp_plan

        cfg = cfg.model_copy(update={"tp_plan": mlp_only_tp_plan(spec.model_path, cfg.trust_remote_code)})
    load_kw = cfg.from_pretrained_kwargs(device)
    offload_dir = None
    if cfg.device_map is not None and "offload_folder" not in load_kw:  # budgets may send weights to disk
        import tempfile

        offload_dir = tempfile.TemporaryDirectory(prefix="infertune-offload-")
        load_kw["offload_folder"] = offload_dir.name
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(spec.model_path, **load_kw)
    if device.startswith("cuda"):
        torch.cuda.synchronize(device)
    else:
        _fault_in(model)
    load_s = time.perf_counter() - t0
    peak_load = meter.load_peak()
    model.eval()
    placement, layers = None, None
    if cfg.device_map is not None:  # what landed where (one device: accelerate keeps no map), and its cost
        placement = {k: str(v) for k, v in (getattr(model, "hf_device_map", None) or {"": model.device}).items()}
        layers = LayerTimer(model, placement, device.startswith("cuda"))

    prompts = wl.prompt_list()
    encoded = [encode_prompt(tok, p, wl.input_len_of(i), i) for i, p in enumerate(prompts)]
    eos = model.generation_config.eos_token_id
    eos_ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else next(iter(eos_ids), 0)
    gen_kwargs: dict[str, Any] = {
        "max_new_tokens": wl.max_new_tokens,
        "do_sample": wl.do_sample,
        "pad_token_id": pad_id,
        **cfg.generation_kwargs(),
    }
    if wl.ignore_eos:
        gen_kwargs["min_new_tokens"] = wl.max_new_tokens
    if not wl.do_sample:  # drop the checkpoint's sampling defaults, which would only warn under greedy
        gen_kwargs.update(temperature=None, top_p=None, top_k=None)

    def one_call(seqs: list[list[int]]):
        """One generate call; (start, end, per-step times, generated ids)."""
        width = max(len(x) for x in seqs)
        # Left padding: decoder-only models continue from the last position of every row.
        input_ids = torch.tensor([[pad_id] * (width - len(x)) + x for x in seqs], device=model.device)
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in seqs], device=model.device)
        timer = StepTimer()
        torch.manual_seed(wl.seed)
        start = time.perf_counter()
        out = model.generate(input_ids=input_ids, attention_mask=mask, streamer=timer, **gen_kwargs)
        if device.startswith("cuda"):
            torch.cuda.synchronize(device)
        return start, time.perf_counter(), timer.steps, out[:, width:].cpu()

    ttft, e2e, gaps, lengths = [], [], [], []
    total_time, total_out = 0.0, 0
    outputs: dict[int, RequestOutput] = {}

    def record(i: int, seq: list[int], ids: list[int], steps: list[float], t0: float, finish: str) -> None:
        """One timed request: times from `t0`, when it arrived (queueing included)."""
        nonlocal total_out
        ttft.append(steps[0] - t0)
        e2e.append(steps[-1] - t0)
        gaps.extend(np.diff(steps).tolist())
        lengths.append(len(seq))
        total_out += len(ids)
        if i not in outputs:
            text = tok.decode(ids, skip_special_tokens=True)
            outputs[i] = RequestOutput(prompt_index=i, input_tokens=len(seq), output_token_ids=ids, text=text,
                                       finish=finish)

    def record_call(idx: list[int], seqs: list[list[int]], start: float, steps: list[float], gen,
                    t0s: list[float]) -> None:
        """`t0s`: each row's arrival time."""
        for row, (i, (n, finish)) in enumerate(zip(idx, _row_lengths(gen, eos_ids, wl.ignore_eos), strict=True)):
            record(i, seqs[row], gen[row, :n].tolist(), steps[:n], t0s[row], finish)

    def wait_until(t: float) -> None:
        delay = t - time.perf_counter()
        if delay > 0:
            time.sleep(delay)

    if wl.concurrency == 1 and cfg.batching == "serial":
        batches = wl.batches()
        calls = [(False, b) for b in (batches * wl.warmup)[: wl.warmup]] + [(True, b) for b in batches * wl.repeats]
        bursts = False
    else:  # rounds of `concurrency` requests (prompts cycled), arriving together or as a Poisson process
        if wl.arrival == "poisson" and cfg.batching == "continuous":
            raise UserError("poisson arrivals need requests submitted over time: in-process generate_batch takes "
                            "them all at once; use serve-trial or loadtest against a continuous-batching server")
        n = len(encoded)
        burst = [k % n for k in range(wl.concurrency * wl.batch)]
        calls = [(False, burst)] * wl.warmup + [(True, burst)] * wl.repeats
        bursts = True
    emit(event="phase", phase="generate", total=len(calls))
    with torch.inference_mode(), meter.generate_phase() as phase:
        for k, (timed, idx) in enumerate(calls):
            seqs = [encoded[i] for i in idx]
            t0 = time.perf_counter()
            arrive = [t0 + a for a in wl.arrivals(len(idx))]
            if not bursts:
                start, end, steps, gen = one_call(seqs)
                if timed:
                    record_call(idx, seqs, start, steps, gen, [start] * len(idx))
            elif cfg.batching == "static":  # one padded batch once the round's last request has arrived
                wait_until(arrive[-1])
                start, end, steps, gen = one_call(seqs)
                if timed:
                    record_call(idx, seqs, start, steps, gen, arrive)
            elif cfg.batching == "serial":  # one generate per request, in arrival order: the rest wait
                for j, i in enumerate(idx):
                    wait_until(arrive[j])
                    start, end, steps, gen = one_call([seqs[j]])
                    if timed:
                        record_call([i], [seqs[j]], start, steps, gen, [arrive[j]])
            else:
                end = _continuous(model, seqs, idx, wl, cfg, eos_ids, pad_id, record if timed else None, t0)
            if timed:
                total_time += end - t0
            emit(event="progress", done=k + 1, total=len(calls))

    cpu_peak = max(peak_rss_bytes(), *((peak_load, phase.peak) if meter.kind == "cpu_rss" else ()))
    peak = max(peak_load, phase.peak, cpu_peak if meter.kind == "cpu_rss" else 0)
    per_rank = _gather_peaks(peak) if WORLD > 1 else None
    layer_s, slowdown = layer_timing(layers.times(), "cuda:0" if device.startswith("cuda") else "cpu") \
        if layers else (None, None)
    nll = _score_reference(model, tok, spec) if spec.reference_text else None
    ttft_m = _pstats(ttft)
    e2e_m = _pstats(e2e)
    tpot_m = _pstats(gaps) if gaps else (None, None, None)
    p99 = {k: float(np.percentile(v, 99)) if v else None for k, v in (("ttft", ttft), ("tpot", gaps), ("e2e", e2e))}
    metrics = TrialMetrics(
        memory_kind=meter.kind,
        load_s=load_s,
        baseline_memory_bytes=baseline,
        peak_memory_bytes=max(per_rank) if per_rank else peak,
        peak_memory_load_bytes=peak_load,
        peak_memory_generate_bytes=phase.peak,
        peak_memory_reserved_bytes=meter.reserved_peak(),
        cpu_peak_rss_bytes=cpu_peak,  # the generate phase resets the kernel's mark on CPU: keep the max
        weights_bytes=int(model.get_memory_footprint()),
        ttft_s=ttft_m[0], ttft_p50_s=ttft_m[1], ttft_p95_s=ttft_m[2],
        tpot_s=tpot_m[0], tpot_p50_s=tpot_m[1], tpot_p95_s=tpot_m[2],
        e2e_s=e2e_m[0], e2e_p50_s=e2e_m[1], e2e_p95_s=e2e_m[2],
        tokens_per_s=total_out / total_time if total_time > 0 else 0.0,
        output_tokens=total_out,
        input_tokens_mean=float(np.mean(lengths)),
        requests=len(ttft),
        generate_calls=len(calls) - wl.warmup,
        reference_nll=nll,
        concurrency=wl.concurrency,
        ttft_p99_s=p99["ttft"], tpot_p99_s=p99["tpot"], e2e_p99_s=p99["e2e"],
        requests_per_s=len(ttft) / total_time if total_time > 0 else None,
        per_rank=[{"rank": r, "peak_memory_bytes": b} for r, b in enumerate(per_rank)] if per_rank else None,
        peak_memory_sum_bytes=sum(per_rank) if per_rank else None,
        placement=placement,
        layer_forward_s=layer_s or None,
        offload_slowdown=slowdown,
    )
    if offload_dir is not None:
        offload_dir.cleanup()
    return {
        "status": "ok",
        "device": device,
        "metrics": metrics.model_dump(),
        "outputs": [outputs[i].model_dump() for i in sorted(outputs)],
    }


def _continuous(model: Any, seqs: list[list[int]], idx: list[int], wl: Any, cfg: InferenceConfig, eos_ids: set[int],
                pad_id: int, record: Any, t0: float) -> float:
    """All requests of the burst through generate_batch (continuous batching, paged cache); per-token
    timestamps give each request's TTFT and inter-token gaps. Returns the time the last one finished."""
    from transformers.generation import ContinuousBatchingConfig, GenerationConfig

    gcfg = GenerationConfig(max_new_tokens=wl.max_new_tokens, do_sample=wl.do_sample, pad_token_id=pad_id,
                            eos_token_id=sorted(eos_ids) or None,
                            min_new_tokens=wl.max_new_tokens if wl.ignore_eos else None)
    cb = ContinuousBatchingConfig(max_batch_tokens=cfg.max_batch_tokens, num_blocks=cfg.cb_num_blocks,
                                  **_block_size_kwarg(ContinuousBatchingConfig, cfg.cb_block_size))
    outs = model.generate_batch(inputs=seqs, generation_config=gcfg, continuous_batching_config=cb,
                                record_timestamps=True, progress_bar=False)
    end = time.perf_counter()
    by_prompt: dict[tuple[int, ...], list] = {}
    for o in outs.values():
        by_prompt.setdefault(tuple(o.prompt_ids), []).append(o)
    for j, i in enumerate(idx):
        o = by_prompt[tuple(seqs[j])].pop(0)
        if o.error:
            raise RuntimeError(f"continuous batching request failed: {o.error}")
        ids = list(o.generated_tokens)
        stamps = list(o.timestamps or [])
        if record is not None and stamps:
            finish = "eos" if ids and ids[-1] in eos_ids and len(ids) < wl.max_new_tokens else "length"
            record(i, seqs[j], ids, stamps, t0, finish)
    return end


def _block_size_kwarg(cb_config: type, size: int | None) -> dict[str, int]:
    """The KV block size under the name this transformers takes: `page_size` since 5.17, `block_size` before."""
    if size is None:
        return {}
    import inspect

    return {"page_size" if "page_size" in inspect.signature(cb_config).parameters else "block_size": size}


def _score_reference(model: Any, tok: Any, spec: TrialSpec) -> float:
    """Teacher-forced mean NLL of the reference text; its next-token log-probs saved for KL checks.
    Runs after the timed calls, outside the memory phase: it measures quality, not cost."""
    import torch

    ids = tok(spec.reference_text, return_tensors="pt").input_ids.to(model.device)
    with torch.inference_mode():
        logp = torch.log_softmax(model(ids).logits[0].float(), dim=-1)
    nll = -logp[:-1].gather(1, ids[0, 1:, None]).mean().item()
    if spec.logprobs_path and RANK == 0:
        np.save(spec.logprobs_path, logp[:-1].cpu().numpy())
    return nll


def _gather_peaks(peak: int) -> list[int]:
    """Every rank's peak, on every rank (a collective: all ranks call it at the same point)."""
    import torch.distributed as dist

    peaks: list[Any] = [None] * WORLD
    dist.all_gather_object(peaks, peak)
    return [int(p) for p in peaks]


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


def _is_oom(exc: BaseException) -> bool:
    import torch

    text = str(exc).lower()
    return (isinstance(exc, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text
            or "cannot allocate memory" in text or "can't allocate memory" in text)


def main(argv: list[str]) -> int:
    spec_path, result_path = argv
    spec = TrialSpec.model_validate_json(open(spec_path, encoding="utf-8").read())
    result: dict[str, Any]
    try:
        emit(event="phase", phase="import")
        result = run(spec)
    except UserError as e:
        result = {"status": "error", "error_type": "input", "error": str(e)}
    except BaseException as e:  # noqa: BLE001 - every failure becomes this trial's status
        traceback.print_exc(file=sys.stderr)
        status = "oom" if _is_oom(e) else "error"
        result = {"status": status, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    if RANK != 0:  # rank 0 writes the trial's one result (its metrics hold every rank's memory)
        return 0 if result.get("status") == "ok" else 1
    try:
        result["environment"] = environment()
    except Exception as e:  # noqa: BLE001 - a missing probe must not cost the measurement
        result["environment"] = {"error": str(e)}
    write_json_atomic(result_path, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

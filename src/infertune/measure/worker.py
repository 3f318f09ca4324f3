"""The trial child process: load the model once, run the workload, write one JSON result.

Run as `python -m infertune.measure.worker SPEC.json RESULT.json`. Progress goes to stdout as JSON
lines (`{"event": ...}`); anything else there (library chatter) is ignored by the parent. The result
file is written atomically, so the parent sees either a whole result or none (a crash).

The measurement core (load, one timed generate, the recorded requests, the metrics) is `core`; the
trial modes are `single` (the workload's batches), `concurrent` (serial or static rounds), `continuous`
(generate_batch) and `parallel` (tensor-parallel ranks under torchrun); `offload` times device_map layers.
"""

from __future__ import annotations

import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

from infertune.core.errors import UserError
from infertune.core.paths import write_json_atomic
from infertune.measure import concurrent, continuous, single
from infertune.measure.core import Session, emit, load
from infertune.measure.lifeline import die_with_parent
from infertune.measure.offload import layer_timing
from infertune.measure.parallel import RANK, WORLD, gather_peaks
from infertune.measure.results import TrialSpec


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


def run(spec: TrialSpec) -> dict[str, Any]:
    import torch

    m = load(spec)
    s = Session(m, spec)
    cfg, wl = m.cfg, spec.workload
    bursts = not (wl.concurrency == 1 and cfg.batching == "serial")
    calls = concurrent.rounds(wl, cfg.batching, len(s.encoded)) if bursts else single.calls(wl)
    emit(event="phase", phase="generate", total=len(calls))
    with torch.inference_mode(), m.meter.generate_phase() as phase:
        for k, (timed, idx) in enumerate(calls):
            seqs = [s.encoded[i] for i in idx]
            t0 = time.perf_counter()
            arrive = [t0 + a for a in wl.arrivals(len(idx))]
            if not bursts:
                end = single.run_call(s, idx, seqs, timed)
            elif cfg.batching == "continuous":
                end = continuous.run_round(s, idx, seqs, t0, timed)
            else:
                end = concurrent.run_round(s, idx, seqs, arrive, timed, cfg.batching)
            if timed:
                s.total_time += end - t0
                s.call_s.append(end - t0)
            emit(event="progress", done=k + 1, total=len(calls))

    cpu_rss = m.meter.kind == "cpu_rss"
    cpu_peak = m.meter.process_peak()  # this process's own peak (VmHWM), never its parent's
    peak = max(m.peak_load, phase.peak, cpu_peak if cpu_rss else 0)
    per_rank = gather_peaks(peak) if WORLD > 1 else None
    layer_s, slowdown = (
        layer_timing(m.layers.times(), "cuda:0" if m.device.startswith("cuda") else "cpu") if m.layers else (None, None)
    )
    nll = _score_reference(m.model, m.tok, spec) if spec.reference_text else None
    metrics = s.metrics(phase.peak, cpu_peak, peak, per_rank, len(calls), layer_s, slowdown, nll)
    if m.offload_dir is not None:
        m.offload_dir.cleanup()
    return {
        "status": "ok",
        "device": m.device,
        "metrics": metrics.model_dump(),
        "outputs": [s.outputs[i].model_dump() for i in sorted(s.outputs)],
    }


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


def _is_oom(exc: BaseException) -> bool:
    import torch

    text = str(exc).lower()
    return (
        isinstance(exc, (MemoryError, torch.OutOfMemoryError))
        or "out of memory" in text
        or "cannot allocate memory" in text
        or "can't allocate memory" in text
    )


def main(argv: list[str]) -> int:
    die_with_parent()  # first: a trial never outlives the process that started it
    spec_path, result_path = argv
    spec = TrialSpec.model_validate_json(Path(spec_path).read_text(encoding="utf-8"))
    result: dict[str, Any]
    try:
        emit(event="phase", phase="import")
        result = run(spec)
    except UserError as e:
        result = {"status": "error", "error_type": "input", "error": str(e)}
    except BaseException as e:
        traceback.print_exc(file=sys.stderr)
        status = "oom" if _is_oom(e) else "error"
        result = {"status": status, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
    if RANK != 0:  # rank 0 writes the trial's one result (its metrics hold every rank's memory)
        return 0 if result.get("status") == "ok" else 1
    try:
        result["environment"] = environment()
    except Exception as e:
        result["environment"] = {"error": str(e)}
    write_json_atomic(Path(result_path), result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

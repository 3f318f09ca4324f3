"""What a cluster trial says about where it ran, read on its node (`placed`), and the run's view by node
(`by_node`): a trial's `environment["placement"]` holds the Ray node, its address, the device resource it asked
for, the GPUs Ray gave it with their name and driver (nvidia-smi), and the node's CPU model; `model` is the
device model a step's pairs are pinned to (the GPUs' name, else the CPU's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infertune.measure.machine import MachineLoad, combine
from infertune.measure.results import TrialResult
from infertune.probe.host import cpu_model_name


def gpu_facts(gpu_ids: list[str], smi: str | None = None) -> dict[str, Any]:
    """The name and driver of the GPUs with these ids, from nvidia-smi on this node ({} without it or them)."""
    smi = smi or shutil.which("nvidia-smi")
    if not gpu_ids or smi is None:
        return {}
    try:
        out = subprocess.run(
            [smi, "--query-gpu=index,uuid,name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    rows = [[x.strip() for x in line.split(",")] for line in out.splitlines() if line.count(",") >= 3]
    mine = [r for r in rows if r[0] in gpu_ids or r[1] in gpu_ids]  # Ray's ids: indices (or UUIDs)
    if not mine:
        return {}
    return {"gpu_name": ", ".join(sorted({r[2] for r in mine})), "driver": mine[0][3]}


def placed(
    fn: Callable[..., TrialResult], args: tuple, kwargs: dict, device: str | None, visible: list[str] | None = None
) -> tuple[TrialResult, bytes | None]:
    """Runs on the node, as the Ray task: the trial (the same isolated child as a local run), then where it ran.
    The reference log-probs the trial writes (`logprobs_path`, in the driver's run directory) go to a folder of the
    node's own and come back as bytes: the driver alone writes the run directory, which a node may not see.
    `visible`: a tensor-parallel trial's other ranks' GPUs (held by its placement group), shown to its child."""
    import ray

    gpus = [str(g) for g in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:  # rank 0's GPU (this task's), then the other ranks': the child's torchrun sees them all
        gpus = gpus + [g for g in visible if g not in gpus]
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    want = kwargs.get("logprobs_path")
    blob = None
    try:
        if want is None:
            result = fn(*args, **kwargs)
        else:
            with tempfile.TemporaryDirectory(prefix="infertune-logprobs-") as tmp:
                here = Path(tmp) / Path(want).name
                result = fn(*args, **{**kwargs, "logprobs_path": here})
                blob = here.read_bytes() if here.is_file() else None
    finally:
        if visible and before is not None:  # this worker process runs other tasks after this one
            os.environ["CUDA_VISIBLE_DEVICES"] = before
    ctx = ray.get_runtime_context()
    placement: dict[str, Any] = {
        "node": ctx.get_node_id(),
        "address": ray.util.get_node_ip_address(),
        "device": device,
        "gpus": gpus,
        "pid": os.getpid(),
        "ranks": getattr(args[0] if args else kwargs.get("config"), "tp_size", 1),
        "cpu": cpu_model_name() or None,
        **gpu_facts(gpus),
    }
    placement["model"] = placement.get("gpu_name") or placement["cpu"]
    result.environment = {**(result.environment or {}), "placement": placement}
    return result, blob


def by_node(trials: list[tuple[dict[str, Any] | None, MachineLoad | None]]) -> dict[str, Any] | None:
    """(a trial's environment, the load over its step) per step -> per node: where, on what, and whether that
    node was busy while its trials ran; None for a run on this machine alone (no placement)."""
    groups: dict[str, list[tuple[dict[str, Any], MachineLoad | None]]] = {}
    for env, load in trials:
        where = (env or {}).get("placement")
        if where:
            groups.setdefault(where["node"], []).append((where, load))
    if not groups:
        return None
    out = {}
    for node, rows in groups.items():
        load = combine([x for _, x in rows])
        first = rows[0][0]
        out[node] = {
            "address": first.get("address"),
            "model": first.get("model"),
            "gpu_name": first.get("gpu_name"),
            "driver": first.get("driver"),
            "steps": len(rows),
            "busy": bool(load and load.busy),
            "busy_reasons": load.reasons if load else [],
            "load_average": load.load_average if load else None,
        }
    return out

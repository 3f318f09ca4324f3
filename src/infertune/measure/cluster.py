"""Trials on a Ray cluster: each trial is a Ray task that runs `run_trial` (the same isolated child) on a node.

The task asks for what the trial needs (a GPU per rank where the cluster has GPUs, a CPU, optionally a custom
device resource); the result says where it ran (`environment["placement"]`, measure/cluster_node.py). `pin()`
keeps the trials that follow it on one node and one device (a step's interleaved pairs); `lanes()` are the
places trials may run side by side (a sweep). A trial whose worker or node is lost is retried once elsewhere;
lost twice, it is a failed trial with that reason. Ray is an optional extra (`pip install infertune[cluster]`);
without it `--cluster` is refused in one line.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from infertune.core.errors import UserError
from infertune.core.workload import read_cluster
from infertune.measure.cluster_node import placed
from infertune.measure.results import TrialResult
from infertune.measure.trial import run_trial

TrialFn = Callable[..., TrialResult]
DEVICE_PREFIX = "infertune_device"  # `ray start --resources '{"infertune_device_0": 1}'`: one per device


def parse_cluster(value: str) -> str | None:
    """`ray` (the local or RAY_ADDRESS cluster, started if none) or `ray=ADDRESS`; the address, or None."""
    kind, _, address = value.partition("=")
    if kind != "ray" or (_ and not address):
        raise UserError(f"--cluster must be 'ray' or 'ray=ADDRESS' (got {value!r})")
    return address or None


def require_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("--cluster ray needs Ray: pip install 'infertune[cluster]'") from None
    return ray


class RayExecutor:
    """A drop-in for `run_trial` (same arguments) that runs each trial as a Ray task.

    `devices`: custom resource names standing for devices (default: the cluster's `infertune_device*`
    resources); a trial asks for one of them, so that related trials stay on one device. `gpus_per_rank`: what
    each tensor-parallel rank asks for (0 on a CPU cluster)."""

    def __init__(
        self,
        address: str | None = None,
        devices: list[str] | None = None,
        gpus_per_rank: float = 0.0,
        trial_fn: TrialFn = run_trial,
        retries: int = 1,
    ) -> None:
        self.ray = require_ray()
        if not self.ray.is_initialized():
            self.ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        found = sorted(r for r in self.ray.cluster_resources() if r.startswith(DEVICE_PREFIX))
        self.devices = devices if devices is not None else found
        self.gpus_per_rank = gpus_per_rank
        self.trial_fn = trial_fn
        self.retries = retries
        self.pending: list[Any] = []
        self.lock = threading.Lock()
        self.local = threading.local()  # per thread (tuning/ahead.py measures steps side by side): its pin
        self.turn = 0

    @property
    def pinned(self) -> dict[str, Any] | None:
        """Where this thread's current group of trials runs (pin()): device, then node once the first ran."""
        return getattr(self.local, "pinned", None)

    @pinned.setter
    def pinned(self, value: dict[str, Any] | None) -> None:
        self.local.pinned = value

    def pin(self, lane: dict[str, Any] | None = None) -> None:
        """This thread's trials from here to its next pin() run on one node and one device: the first where Ray
        puts it (on `lane`, else on the next of `devices` in turn), the others beside it. A step's pairs are
        never split."""
        if lane is None:
            lane = {"device": self.devices[self.turn % len(self.devices)] if self.devices else None}
            self.turn += 1
        self.pinned = dict(lane)

    def lanes(self) -> list[dict[str, Any]]:
        """Where trials can run side by side, each lane one at a time: a device resource each, else a GPU each
        (where trials ask for GPUs), else one per alive node."""
        if self.devices:
            return [{"device": d} for d in self.devices]
        if self.gpus_per_rank:
            return [{} for _ in range(max(1, int(self.ray.cluster_resources().get("GPU", 1))))]
        return [{"node": n["NodeID"]} for n in self.ray.nodes() if n.get("Alive")]

    def submit(self, *args: Any, device: str | None = None, node: str | None = None, **kwargs: Any) -> Any:
        """Start a trial (on `device`, `node`, else where pin() says); its Ray object ref. `on_event` does not
        cross machines: it is dropped."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        kwargs.pop("on_event", None)
        pin = self.pinned or {}
        device, node = device or pin.get("device"), node or pin.get("node")
        config = args[0] if args else kwargs["config"]
        options: dict[str, Any] = {
            "num_cpus": 1,
            "num_gpus": self.gpus_per_rank * max(1, config.tp_size),
            "resources": {device: 1.0} if device else {},
            "max_retries": 0,
        }
        if node:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        ref = self.ray.remote(placed).options(**options).remote(self.trial_fn, args, kwargs, device)
        with self.lock:
            self.pending.append(ref)
        return ref

    def wait(
        self, ref: Any, args: tuple, kwargs: dict, device: str | None = None, node: str | None = None
    ) -> TrialResult:
        """The trial's result; a lost worker or node is retried once, then is a failed trial saying so."""
        from ray import exceptions as rx

        lost = (rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError, rx.TaskUnschedulableError)
        reasons = []
        for attempt in range(self.retries + 1):
            if attempt:
                node = self._alive(node)
                ref = self.submit(*args, device=device, node=node, **kwargs)
            try:
                result, blob = self.ray.get(ref)
            except KeyboardInterrupt:  # Ctrl-C: nothing of ours is left running on the cluster
                self.cancel()
                raise
            except lost as err:
                reasons.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
                continue
            finally:
                with self.lock:
                    self.pending = [r for r in self.pending if r is not ref]
            if blob is not None:  # the reference log-probs, written here by the driver (cluster_node.placed)
                _write_bytes(Path(kwargs["logprobs_path"]), blob)
            if reasons:  # what the retry replaced: the report says the trial was lost once
                result.environment = {**(result.environment or {}), "lost": reasons}
            if self.pinned is not None and "node" not in self.pinned:  # the group's first trial: the rest follow
                where = (result.environment or {})["placement"]
                self.pinned.update(node=where["node"], model=where.get("model"))
            return result
        config = args[0] if args else kwargs["config"]
        workload = args[1] if len(args) > 1 else kwargs["workload"]
        model_path = args[2] if len(args) > 2 else kwargs["model_path"]
        return TrialResult(
            status="error",
            error=f"lost on the cluster {len(reasons)} times: " + "; ".join(reasons),
            config=config,
            workload=workload,
            model_path=str(model_path),
            environment={"retries": len(reasons) - 1},
        )

    def _alive(self, node: str | None) -> str | None:
        """Before a retry: `node` (or the pinned one) when it is still up; a lost node is let go (the pin moves)."""
        up = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        if self.pinned is not None and self.pinned.get("node") not in up:
            self.pinned.pop("node", None)
            have = self.ray.cluster_resources()  # its device went with it: another one (a lost one waits forever)
            if self.pinned.get("device") not in have:
                self.pinned["device"] = next((d for d in self.devices if d in have), None)
        return node if node in up else None

    def __call__(self, *args: Any, device: str | None = None, node: str | None = None, **kwargs: Any) -> TrialResult:
        kw = {k: v for k, v in kwargs.items() if k != "on_event"}
        ref = self.submit(*args, device=device, node=node, **kw)
        return self.wait(ref, args, kw, device, node)

    def cancel(self) -> None:
        """Ctrl-C: cancel every trial still on the cluster."""
        with self.lock:
            refs, self.pending = self.pending, []
        for ref in refs:
            self.ray.cancel(ref, force=True)


def _write_bytes(path: Path, blob: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(blob)
    os.replace(tmp, path)


def check_cluster(cluster: str | None, run_file: str | Path | None = None) -> str | None:
    """Where the trials run: `cluster` (the flag), else the run file's `cluster:`; None: this machine. A bad
    value (or a missing Ray) is refused in one line, before anything runs or connects."""
    if cluster is None:
        cluster = read_cluster(run_file)
    if cluster is not None:
        parse_cluster(cluster)
        require_ray()
    return cluster


def executor_for(cluster: str | None) -> TrialFn:
    """What runs the trials: this machine (`None`) or a Ray cluster (`ray`, `ray=ADDRESS`); bad input refused."""
    return run_trial if cluster is None else RayExecutor(parse_cluster(cluster))

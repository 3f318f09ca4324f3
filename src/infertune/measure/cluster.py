"""Trials on a Ray cluster: each trial is a Ray task that runs `run_trial` (the same isolated child) on a node.

The task asks for what the trial needs (a GPU per rank where the cluster has GPUs, a CPU, optionally a custom
device resource); the result says where it ran (`environment["placement"]`: node, address, device resource).
A trial whose worker or node is lost is retried once elsewhere; lost twice, it is a failed trial with that reason.
Ray is an optional extra (`pip install infertune[cluster]`); without it `--cluster` is refused in one line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from infertune.core.errors import UserError
from infertune.measure.results import TrialResult
from infertune.measure.trial import run_trial

TrialFn = Callable[..., TrialResult]


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


def _placed(fn: TrialFn, args: tuple, kwargs: dict, device: str | None) -> TrialResult:
    """Runs on the node: the trial, then where it ran."""
    import ray

    result = fn(*args, **kwargs)
    ctx = ray.get_runtime_context()
    placement = {"node": ctx.get_node_id(), "address": ray.util.get_node_ip_address(), "device": device}
    placement["gpus"] = [str(g) for g in ctx.get_accelerator_ids().get("GPU", [])]
    placement["pid"] = os.getpid()
    result.environment = {**(result.environment or {}), "placement": placement}
    return result


class RayExecutor:
    """A drop-in for `run_trial` (same arguments) that runs each trial as a Ray task.

    `devices`: custom resource names standing for devices (e.g. ["dev0", "dev1"]); a trial asks for one of them,
    in turn, so that a caller can keep related trials on one device with `device=`. `gpus_per_rank`: what each
    tensor-parallel rank asks for (0 on a CPU cluster)."""

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
        self.devices = devices or []
        self.gpus_per_rank = gpus_per_rank
        self.trial_fn = trial_fn
        self.retries = retries
        self.pending: list[Any] = []

    def submit(self, *args: Any, device: str | None = None, **kwargs: Any) -> Any:
        """Start a trial; returns its Ray object ref. `on_event` does not cross machines: it is dropped."""
        kwargs.pop("on_event", None)
        config = args[0] if args else kwargs["config"]
        ranks = max(1, config.tp_size)
        resources = {device: 1.0} if device else {}
        task = self.ray.remote(_placed).options(
            num_cpus=1, num_gpus=self.gpus_per_rank * ranks, resources=resources, max_retries=0
        )
        ref = task.remote(self.trial_fn, args, kwargs, device)
        self.pending.append(ref)
        return ref

    def wait(self, ref: Any, args: tuple, kwargs: dict, device: str | None = None) -> TrialResult:
        """The trial's result; a lost worker or node is retried once, then is a failed trial saying so."""
        from ray import exceptions as rx

        lost = (rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError, rx.TaskUnschedulableError)
        reasons = []
        for attempt in range(self.retries + 1):
            if attempt:
                ref = self.submit(*args, device=device, **kwargs)
            try:
                result = self.ray.get(ref)
            except KeyboardInterrupt:  # Ctrl-C: nothing of ours is left running on the cluster
                self.cancel()
                raise
            except lost as err:
                reasons.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
                continue
            finally:
                self.pending = [r for r in self.pending if r is not ref]
            if reasons:  # what the retry replaced: the report says the trial was lost once
                result.environment = {**(result.environment or {}), "lost": reasons}
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

    def __call__(self, *args: Any, device: str | None = None, **kwargs: Any) -> TrialResult:
        kw = {k: v for k, v in kwargs.items() if k != "on_event"}
        ref = self.submit(*args, device=device, **kw)
        return self.wait(ref, args, kw, device)

    def cancel(self) -> None:
        """Ctrl-C: cancel every trial still on the cluster."""
        for ref in self.pending:
            self.ray.cancel(ref, force=True)
        self.pending = []


def check_cluster(cluster: str | None) -> None:
    """Refuse a bad `--cluster` (or a missing Ray) in one line, before anything runs or connects."""
    if cluster is not None:
        parse_cluster(cluster)
        require_ray()


def executor_for(cluster: str | None) -> TrialFn:
    """What runs the trials: this machine (`None`) or a Ray cluster (`ray`, `ray=ADDRESS`); bad input refused."""
    return run_trial if cluster is None else RayExecutor(parse_cluster(cluster))

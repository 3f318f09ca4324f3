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
import time
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
    each tensor-parallel rank asks for (default: 1 on a cluster with GPUs, 0 on a CPU cluster)."""

    def __init__(
        self,
        address: str | None = None,
        devices: list[str] | None = None,
        gpus_per_rank: float | None = None,
        trial_fn: TrialFn = run_trial,
        retries: int = 1,
    ) -> None:
        self.ray = require_ray()
        if not self.ray.is_initialized():
            self.ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        found = sorted(r for r in self.ray.cluster_resources() if r.startswith(DEVICE_PREFIX))
        self.devices = devices if devices is not None else found
        # None: a GPU per rank where the cluster has GPUs (else Ray would show a trial every GPU, or none)
        self.gpus_per_rank = gpus_per_rank if gpus_per_rank is not None else float(self._has_gpus())
        self.trial_fn = trial_fn
        self.retries = retries
        self.pending: list[Any] = []
        self.lock = threading.Lock()
        self.local = threading.local()  # per thread (tuning/ahead.py measures steps side by side): its pin
        self.turn = 0
        self.gangs: dict[Any, Any] = {}  # a tensor-parallel trial's ref -> its placement group, while it runs
        self.gang_timeout_s = 300.0  # how long a tensor-parallel trial waits for a node that holds all its ranks
        self.settle_s = 20.0  # how long a retry watches the node that lost a worker: still up, or dying

    def _has_gpus(self) -> bool:
        return bool(self.ray.cluster_resources().get("GPU", 0))

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
        visible, gang = None, None
        if config.tp_size > 1:  # tensor parallel: its ranks reserved together on one node, the task in rank 0's
            held = self._gang(config.tp_size, options, pin.get("address") if node else None)
            if held is None:
                return None
            options, visible, gang = held
        ref = self.ray.remote(placed).options(**options).remote(self.trial_fn, args, kwargs, device, visible)
        with self.lock:
            self.pending.append(ref)
            if gang is not None:
                self.gangs[ref] = gang
        return ref

    def _gang(
        self, ranks: int, options: dict[str, Any], address: str | None
    ) -> tuple[dict[str, Any], list[str] | None, Any] | None:
        """A placement group of the trial's ranks (a CPU and `gpus_per_rank` each; rank 0 also its device
        resource, and the pinned node's address), STRICT_PACK: one node. The trial task runs in rank 0's bundle;
        it sees every rank's GPUs (`visible`, read by one short task in each other bundle). None when no node can
        hold them within `gang_timeout_s`: the trial fails saying so."""
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        rank = {"CPU": 1.0, **({"GPU": self.gpus_per_rank} if self.gpus_per_rank else {})}
        first = {**rank, **options["resources"], **({f"node:{address}": 0.001} if address else {})}
        pg = placement_group([first] + [dict(rank)] * (ranks - 1), strategy="STRICT_PACK")
        ready, _ = self.ray.wait([pg.ready()], timeout=self.gang_timeout_s)
        if not ready:
            remove_placement_group(pg)
            return None
        in_bundle = [PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i) for i in range(ranks)]
        visible = None
        if self.gpus_per_rank:
            probe = self.ray.remote(_gpu_ids)
            others = [
                probe.options(num_cpus=1, num_gpus=self.gpus_per_rank, scheduling_strategy=s) for s in in_bundle[1:]
            ]
            visible = [g for ids in self.ray.get([o.remote() for o in others]) for g in ids]
        task = {**options, "num_gpus": self.gpus_per_rank, "resources": {}, "scheduling_strategy": in_bundle[0]}
        return task, visible, pg

    def wait(
        self, ref: Any, args: tuple, kwargs: dict, device: str | None = None, node: str | None = None
    ) -> TrialResult:
        """The trial's result; a lost worker or node is retried once, then is a failed trial saying so."""
        from ray import exceptions as rx

        lost = (rx.WorkerCrashedError, rx.NodeDiedError, rx.ObjectLostError, rx.TaskUnschedulableError)
        reasons = []
        for attempt in range(self.retries + 1):
            if attempt:
                node, device = self._alive(node, device)
                ref = self.submit(*args, device=device, node=node, **kwargs)
            if ref is None:  # a tensor-parallel trial no node can hold: not lost, impossible here
                config = args[0] if args else kwargs["config"]
                reasons.append(f"no node of the cluster holds its {config.tp_size} ranks ({self.gang_timeout_s:g} s)")
                break
            try:
                result, blob = self.ray.get(ref)
            except KeyboardInterrupt:  # Ctrl-C: nothing of ours is left running on the cluster
                self.cancel()
                raise
            except lost as err:
                reasons.append(f"{type(err).__name__}: {str(err).splitlines()[0][:200]}")
                continue
            finally:
                self._release(ref)
            if blob is not None:  # the reference log-probs, written here by the driver (cluster_node.placed)
                _write_bytes(Path(kwargs["logprobs_path"]), blob)
            if reasons:  # what the retry replaced: the report says the trial was lost once
                result.environment = {**(result.environment or {}), "lost": reasons}
            if self.pinned is not None and "node" not in self.pinned:  # the group's first trial: the rest follow
                where = (result.environment or {})["placement"]
                self.pinned.update(node=where["node"], model=where.get("model"), address=where.get("address"))
            return result
        config = args[0] if args else kwargs["config"]
        workload = args[1] if len(args) > 1 else kwargs["workload"]
        model_path = args[2] if len(args) > 2 else kwargs["model_path"]
        lost_n = sum(not r.startswith("no node") for r in reasons)
        return TrialResult(
            status="error",
            error=(f"lost on the cluster {lost_n} times: " if lost_n else "not run: ") + "; ".join(reasons),
            config=config,
            workload=workload,
            model_path=str(model_path),
            environment={"retries": len(reasons) - 1},
        )

    def _alive(self, node: str | None, device: str | None) -> tuple[str | None, str | None]:
        """Before a retry: `node` and `device` (or the pinned ones) where they are still up; a lost node is let go
        (the pin moves), and so is a device that went with it (a task asking for a lost one would wait forever).
        A node that just lost a worker is watched for `settle_s` first: a dying node takes seconds to be marked."""
        pin = self.pinned if self.pinned is not None else {}
        want_node, want_device = node or pin.get("node"), device or pin.get("device")
        deadline = time.monotonic() + self.settle_s
        while True:
            nodes = self.ray.nodes()
            up = {n["NodeID"] for n in nodes if n.get("Alive")}
            have = {r for n in nodes if n.get("Alive") for r in n.get("Resources", {})}
            lost = (want_node is not None and want_node not in up) or (
                want_device is not None and want_device not in have
            )
            if lost or (want_node is None and want_device is None) or time.monotonic() >= deadline:
                break
            time.sleep(1.0)

        def elsewhere(d: str | None) -> str | None:
            return d if d is None or d in have else next((x for x in self.devices if x in have), None)

        if self.pinned is not None:
            if self.pinned.get("node") not in up:
                self.pinned.pop("node", None)
                self.pinned.pop("address", None)
            self.pinned["device"] = elsewhere(self.pinned.get("device"))
        return (node if node in up else None), elsewhere(device)

    def __call__(self, *args: Any, device: str | None = None, node: str | None = None, **kwargs: Any) -> TrialResult:
        kw = {k: v for k, v in kwargs.items() if k != "on_event"}
        ref = self.submit(*args, device=device, node=node, **kw)
        return self.wait(ref, args, kw, device, node)

    def _release(self, ref: Any) -> None:
        """A finished (or lost, or cancelled) trial: off the pending list, its ranks' placement group freed."""
        from ray.util.placement_group import remove_placement_group

        with self.lock:
            self.pending = [r for r in self.pending if r is not ref]
            gang = self.gangs.pop(ref, None)
        if gang is not None:
            remove_placement_group(gang)

    def cancel(self) -> None:
        """Ctrl-C: cancel every trial still on the cluster (and free its ranks' placement group)."""
        with self.lock:
            refs, self.pending = self.pending, []
        for ref in refs:
            self.ray.cancel(ref, force=True)
            self._release(ref)


def _gpu_ids() -> list[str]:
    """In a placement group's bundle: the GPUs Ray gave it (held by the group after this task ends)."""
    import ray

    return [str(g) for g in ray.get_runtime_context().get_accelerator_ids().get("GPU", [])]


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

"""`infertune doctor --env`: the running environment's known-bad combinations, read without importing the
libraries that matter (versions from package metadata, devices from the hardware probe)."""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, requires

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

from infertune.doctor.nodes import Finding
from infertune.probe.hardware import Hardware
from infertune.probe.versions import library_versions

WHERE = "environment"
# Packages whose torch requirement the installed torch must meet (their own metadata says which).
TORCH_USERS = ("transformers", "accelerate", "bitsandbytes", "flash-attn", "kernels", "torchao", "optimum-quanto")
CUDA_ONLY = {"flash-attn": "FlashAttention 2", "flash-attn-3": "FlashAttention 3"}


def _finding(rule: str, message: str, fix: str) -> Finding:
    return Finding(path=WHERE, line=0, col=0, rule=rule, message=message, fix=fix)


def _torch_requirement(package: str) -> Requirement | None:
    """The package's torch requirement from its metadata (extras' markers ignored: `transformers[torch]` is
    how it is used)."""
    try:
        reqs = requires(package) or []
    except PackageNotFoundError:
        return None
    for r in reqs:
        try:
            req = Requirement(r)
        except InvalidRequirement:
            continue
        if req.name == "torch" and req.specifier:
            return req
    return None


def _nvidia_present() -> bool:
    return os.path.exists("/dev/nvidia0") or os.path.exists("/proc/driver/nvidia/version")


def check_environment(
    hw: Hardware,
    versions: dict[str, str | None] | None = None,
    nvidia_present: Callable[[], bool] = _nvidia_present,
    model_bytes: int | None = None,
    model: str | None = None,
) -> list[Finding]:
    """`versions`/`nvidia_present` injectable for tests; `model_bytes`: the estimator's weights of `--model`."""
    v = versions if versions is not None else library_versions()
    out: list[Finding] = []
    torch_v = v.get("torch")
    if torch_v is None:
        out.append(_finding("ENV001", "torch is not installed", "pip install torch (the build for your CUDA)"))
    if v.get("transformers") is None:
        out.append(_finding("ENV001", "transformers is not installed", "pip install 'transformers[torch]'"))
    if torch_v is not None:
        for pkg in TORCH_USERS:
            if v.get(pkg) is None:
                continue
            req = _torch_requirement(pkg)
            if req is None:  # no torch pin to check
                continue
            try:
                ok = req.specifier.contains(Version(torch_v.split("+")[0]), prereleases=True)
            except InvalidVersion:
                continue
            if not ok:
                out.append(
                    _finding(
                        "ENV002",
                        f"{pkg} {v[pkg]} needs torch{req.specifier}, installed: {torch_v}",
                        f"pip install 'torch{req.specifier}' (or a {pkg} release for torch {torch_v})",
                    )
                )
    cuda_build = torch_v is not None and "+cpu" not in torch_v
    if not hw.gpus:
        if nvidia_present():
            why = "a CPU-only torch build" if not cuda_build else "torch does not see it (driver or CUDA mismatch?)"
            out.append(
                _finding(
                    "ENV003",
                    f"an NVIDIA GPU is present but torch cannot use it: {why}",
                    "install the torch build for your CUDA version (pip index of pytorch.org/whl/cuXXX)",
                )
            )
        where = "Apple GPU (mps)" if hw.mps else "CPU"
        out.append(
            _finding(
                "ENV004",
                f"no CUDA device visible: models land on the {where}"
                + ("" if hw.mps else ": seconds per token beyond ~1B parameters"),
                "run on a GPU machine, or pick a small/quantized model (GGUF with llama.cpp on CPU)",
            )
        )
        for pkg, what in CUDA_ONLY.items():
            if v.get(pkg):
                out.append(
                    _finding(
                        "ENV005",
                        f"{pkg} is installed but there is no CUDA device: {what} cannot run",
                        "use attn_implementation='sdpa' here",
                    )
                )
    if model_bytes is not None:
        free = max((g.free_memory_bytes or g.total_memory_bytes for g in hw.gpus), default=hw.ram_available_bytes)
        device = "the largest GPU" if hw.gpus else "RAM"
        if model_bytes > 0.9 * free:
            out.append(
                _finding(
                    "ENV006",
                    f"{model or 'the model'} needs {model_bytes / 2**30:.1f} GiB of weights "
                    f"(estimate); {device} has {free / 2**30:.1f} GiB free",
                    "a smaller dtype or weight quantization (infertune advise --model ...), or "
                    "device_map='auto' with CPU offload",
                )
            )
    return out

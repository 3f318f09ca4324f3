"""What a checkpoint is, when it is on this machine (a local folder, or the Hugging Face cache; never downloaded):
standard library only, read lazily by the rules that need it."""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

seen: set[tuple[str, str]] | None = None  # while the findings cache records a script: what its check looked at


def note(path: object, kind: str = "stat") -> None:
    """Say that the check looked at `path`: its modification time and size ("stat": a file's text, a folder's
    entries), or only which version-pin files a folder holds ("pins"). The findings cache keeps that stamp, and
    an entry whose stamps moved is not used."""
    if seen is not None:
        seen.add((kind, os.path.abspath(str(path))))


def hf_cache() -> Path:
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    return Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"


def folders(model: str) -> list[Path]:
    """Where this checkpoint's files may be here: the path itself, and its cached snapshots."""
    out = [Path(model)]
    snapshots = hf_cache() / f"models--{model.replace('/', '--')}" / "snapshots"
    if "/" in model and snapshots.is_dir():
        out += sorted(p for p in snapshots.iterdir() if p.is_dir())
    if seen is not None:
        for p in (*out, snapshots):
            note(p)
    return out


@cache
def chat_template(model: str | None) -> str | None:
    """The checkpoint's chat template (chat_template.jinja, chat_template.json, tokenizer_config.json's
    chat_template; '' when its tokenizer files are here without one); None when they are not here."""
    if not model:
        return None
    for folder in folders(model):
        if not folder.is_dir():
            continue
        if seen is not None:
            for name in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json"):
                note(folder / name)
        try:
            if (folder / "chat_template.jinja").is_file():
                return (folder / "chat_template.jinja").read_text(encoding="utf-8")
            import json  # only for a folder that is here: json stays off the fast path

            if (folder / "chat_template.json").is_file():
                return str(json.loads((folder / "chat_template.json").read_text(encoding="utf-8")))
            config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        found = config.get("chat_template") if isinstance(config, dict) else None
        return str(found) if found else ""
    return None


def has_chat_template(model: str | None) -> bool | None:
    """Does the checkpoint ship a chat template? None when its tokenizer files are not here."""
    text = chat_template(model)
    return None if text is None else bool(text)

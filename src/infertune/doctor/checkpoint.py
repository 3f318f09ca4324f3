"""What a checkpoint is, when it is on this machine (a local folder, or the Hugging Face cache; never downloaded):
standard library only, read lazily by the rules that need it."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # mypy reads it as True
if TYPE_CHECKING:
    from functools import cache as memo  # the type; at run time, the few lines below
else:

    class memo:
        """`functools.cache` for a one-argument function, without importing functools (which, with the
        collections it pulls in, costs a check about 4 ms of start-up): one answer per argument until
        `cache_clear()`."""

        def __init__(self, fn):
            self.fn, self.answers = fn, {}
            self.__doc__, self.__name__ = fn.__doc__, fn.__name__

        def __call__(self, arg):
            if arg not in self.answers:
                self.answers[arg] = self.fn(arg)
            return self.answers[arg]

        def cache_clear(self):
            self.answers.clear()


seen: set[tuple[str, str]] | None = None  # while the findings cache records a script: what its check looked at


def note(path: object, kind: str = "stat") -> None:
    """Say that the check looked at `path`: its modification time and size ("stat": a file's text, a folder's
    entries), or only which version-pin files a folder holds ("pins"). The findings cache keeps that stamp, and
    an entry whose stamps moved is not used."""
    if seen is not None:
        seen.add((kind, os.path.abspath(str(path))))


def hf_cache() -> str:
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    return os.path.join(os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub")


def folders(model: str) -> list[str]:
    """Where this checkpoint's files may be here: the path itself, and its cached snapshots."""
    out = [model]
    snapshots = os.path.join(hf_cache(), f"models--{model.replace('/', '--')}", "snapshots")
    if "/" in model and os.path.isdir(snapshots):
        out += sorted(e.path for e in os.scandir(snapshots) if e.is_dir())
    if seen is not None:
        for p in (*out, snapshots):
            note(p)
    return out


@memo
def chat_template(model: str | None) -> str | None:
    """The checkpoint's chat template (chat_template.jinja, chat_template.json, tokenizer_config.json's
    chat_template; '' when its tokenizer files are here without one); None when they are not here."""
    if not model:
        return None
    for folder in folders(model):
        if not os.path.isdir(folder):
            continue
        jinja, as_json, config_file = (
            os.path.join(folder, n) for n in ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")
        )
        if seen is not None:
            for name in (jinja, as_json, config_file):
                note(name)
        try:
            if os.path.isfile(jinja):
                return _read(jinja)
            import json  # only for a folder that is here: json stays off the fast path

            if os.path.isfile(as_json):
                return str(json.loads(_read(as_json)))
            config = json.loads(_read(config_file))
        except (OSError, ValueError):
            continue
        found = config.get("chat_template") if isinstance(config, dict) else None
        return str(found) if found else ""
    return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def has_chat_template(model: str | None) -> bool | None:
    """Does the checkpoint ship a chat template? None when its tokenizer files are not here."""
    text = chat_template(model)
    return None if text is None else bool(text)

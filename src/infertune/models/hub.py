"""Hugging Face Hub models by name (`ORG/NAME`), without their weights.

`fetch` brings the small files (config.json, generation_config.json, tokenizer_config.json, the safetensors
index) into the normal HF cache and reads each safetensors shard's header by an HTTP range request: the exact
tensor dtypes and shapes, so a checkpoint is sized as stored. The headers are kept in infertune's home, keyed
by the commit, so a model seen once keeps working offline. `download` fetches the weights too, through the same
cache, for the verbs that load the model (measure, tune, serve-trial).

Everything goes through huggingface_hub, so its environment variables apply: HF_TOKEN (gated and private
models), HF_ENDPOINT (a mirror), HF_HUB_OFFLINE (cache only), HF_HUB_CACHE (where the cache is).
Every failure is one UserError line: gated, not found, unknown revision, no network.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING

from infertune.core.errors import UserError
from infertune.core.paths import home, write_json_atomic

if TYPE_CHECKING:
    from huggingface_hub.utils import SafetensorsFileMetadata, SafetensorsRepoMetadata

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
SMALL_FILES = ("generation_config.json", "tokenizer_config.json")  # fetched where they exist
OTHER_WEIGHTS = [
    "*.bin",
    "*.pt",
    "*.pth",
    "*.h5",
    "*.msgpack",
    "*.ot",
    "*.onnx",
    "*.gguf",
    "*.tflite",
    "original/*",
    "consolidated*",
]  # skipped by `download` when the repo has safetensors
LICENSE_PAGE = "https://huggingface.co/{repo}"
HTTP_CLIENTS = ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3")  # transport errors: no answer
REVISION_DOC = "the commit of the hub model (ORG/NAME) described; null for a local folder"  # `model_revision`


def _quiet(_msg: str) -> None:
    pass


def is_hub_id(spec: str) -> bool:
    return bool(HUB_ID.match(spec)) and ".." not in spec


def hub_id(spec: str | None) -> bool:
    """`spec` names a hub model (not a local folder that happens to look like ORG/NAME)."""
    return bool(spec and is_hub_id(spec) and not Path(spec).expanduser().exists())


def revision_of(path: str | Path) -> str | None:
    """The commit a folder holds when it is a snapshot in the HF cache (models--ORG--NAME/snapshots/<commit>);
    None for any other folder."""
    p = Path(path)
    if COMMIT.match(p.name) and p.parent.name == "snapshots" and p.parent.parent.name.startswith("models--"):
        return p.name
    return None


def _repo_of(snapshot: Path) -> str:
    return snapshot.parent.parent.name.removeprefix("models--").replace("--", "/")


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


@contextmanager
def _hub_errors(repo: str, revision: str | None) -> Iterator[None]:
    """huggingface_hub's exceptions as one line each."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except GatedRepoError:
        from huggingface_hub import get_token

        page = LICENSE_PAGE.format(repo=repo)
        if get_token():
            raise UserError(
                f"{repo} is gated and the token in HF_TOKEN has no access to it: accept its license at "
                f"{page} with that account"
            ) from None
        raise UserError(
            f"{repo} is gated: accept its license at {page}, then set HF_TOKEN to a token of that account"
        ) from None
    except RevisionNotFoundError:
        raise UserError(f"{repo} has no revision {revision!r} (a branch, tag or commit)") from None
    except RepositoryNotFoundError:
        if revision and _exists(repo):  # some servers answer an unknown revision as an unknown repository
            raise UserError(f"{repo} has no revision {revision!r} (a branch, tag or commit)") from None
        raise UserError(
            f"model {repo!r} is not a local folder and was not found on {_endpoint()} (a private model needs HF_TOKEN)"
        ) from None
    except LocalEntryNotFoundError as e:  # (an EntryNotFoundError too) no answer, and not in the cache either
        raise UserError(_unreachable(repo, e)) from None
    except EntryNotFoundError as e:
        if "config.json" in str(e):
            raise UserError(f"{repo} has no config.json: not a Transformers model") from None
        raise UserError(f"{repo}: {str(e).splitlines()[0]}") from None
    except OfflineModeIsEnabled:
        raise UserError(f"HF_HUB_OFFLINE is set and {repo} is not in the local Hugging Face cache") from None
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else "?"
        raise UserError(f"{_endpoint()} answered HTTP {status} for {repo}") from None
    except Exception as e:  # the HTTP client's own errors (connection refused, DNS, timeout): no answer
        if type(e).__module__.split(".")[0] in HTTP_CLIENTS:
            raise UserError(_unreachable(repo, e)) from None
        raise


def _unreachable(repo: str, e: Exception) -> str:
    return (
        f"cannot reach {_endpoint()} for {repo} ({type(e).__name__}) and it is not in the local Hugging Face "
        "cache; check the network, HF_ENDPOINT, or set HF_HUB_OFFLINE=1"
    )


def _exists(repo: str) -> bool:
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    try:
        get_hf_file_metadata(hf_hub_url(repo, "config.json"))
        return True
    except Exception:
        return False


@contextmanager
def _hub_logs_quiet() -> Iterator[None]:
    """huggingface_hub logs retries and cache fallbacks as warnings; infertune reports failures itself."""
    log = logging.getLogger("huggingface_hub")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _config(repo: str, revision: str | None, cache_only: bool = False) -> tuple[Path, bool]:
    """config.json in the cache for this revision, and whether the hub answered: one quick HEAD (no retries)
    resolves the commit, else the cached copy serves (offline, or no network). The commit is the snapshot
    folder's name."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, OfflineModeIsEnabled

    try:
        with _hub_errors(repo, revision):
            if cache_only:
                raise OfflineModeIsEnabled(f"{repo}: looked up in the local cache only")
            meta = get_hf_file_metadata(hf_hub_url(repo, "config.json", revision=revision))
    except UserError as e:
        try:  # a known revision in the cache still answers without the network
            return Path(hf_hub_download(repo, "config.json", revision=revision, local_files_only=True)), False
        except (LocalEntryNotFoundError, HfHubHTTPError, ValueError):
            raise e from None
    with _hub_errors(repo, revision):  # by the name asked for, so the cache records it (refs/) for offline use
        path = Path(hf_hub_download(repo, "config.json", revision=revision))
    if meta.commit_hash and path.parent.name != meta.commit_hash:  # the branch moved between the two calls
        raise UserError(f"{repo}: {revision or 'main'} moved while reading it; run again")
    return path, True


def _optional(repo: str, commit: str, filename: str) -> None:
    from huggingface_hub import hf_hub_download

    with suppress(Exception):  # absent from the repo (404, or 401 from a mirror): optional
        hf_hub_download(repo, filename, revision=commit)


def _code_files(config: Path) -> list[str]:
    """The repo's own module files that `auto_map` names (remote code: fetched, never run without
    --trust-remote-code)."""
    try:
        auto_map = json.loads(config.read_text(encoding="utf-8")).get("auto_map") or {}
    except (OSError, ValueError):
        return []
    refs = [r for v in auto_map.values() for r in (v if isinstance(v, list) else [v]) if isinstance(r, str)]
    return sorted({r.rsplit(".", 1)[0] + ".py" for r in refs if "--" not in r and "." in r})


def local_safetensors(folder: Path) -> SafetensorsRepoMetadata | None:
    """`SafetensorsRepoMetadata` from the folder's own weight files; None when it has none (or not all shards).
    The headers are read here, not through `huggingface_hub.get_local_safetensors_metadata`, whose module (the
    whole hub client) takes ~0.3 s to import: a warm `estimate` reads them every time."""
    from huggingface_hub.utils import SafetensorsRepoMetadata

    index = folder / "model.safetensors.index.json"
    try:
        if (folder / "model.safetensors").is_file():
            files = {"model.safetensors": _read_header(folder / "model.safetensors")}
            weight_map = dict.fromkeys(files["model.safetensors"].tensors, "model.safetensors")
            metadata, sharded = None, False
        elif index.is_file():
            data = json.loads(index.read_text(encoding="utf-8"))
            weight_map, metadata, sharded = data["weight_map"], data.get("metadata"), True
            shards = set(weight_map.values())
            if not shards or not all((folder / s).is_file() for s in shards):
                return None
            files = {s: _read_header(folder / s) for s in sorted(shards)}
        else:
            return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return SafetensorsRepoMetadata(metadata=metadata, sharded=sharded, weight_map=weight_map, files_metadata=files)


def _read_header(file: Path) -> SafetensorsFileMetadata:
    """One safetensors file's header: 8 bytes (little-endian length), then that many bytes of JSON."""
    from huggingface_hub.utils import SafetensorsFileMetadata, TensorInfo

    with open(file, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 2 <= size <= 100 * 2**20:
            raise ValueError(f"{file}: not a safetensors header")
        header = json.loads(f.read(size))
    metadata = header.pop("__metadata__", None) or {}
    return SafetensorsFileMetadata(
        metadata=metadata,
        tensors={
            name: TensorInfo(dtype=t["dtype"], shape=t["shape"], data_offsets=tuple(t["data_offsets"]))
            for name, t in header.items()
        },
    )


def _headers_file(repo: str, commit: str) -> Path:
    return home() / "hub" / f"models--{repo.replace('/', '--')}" / f"{commit}.json"


def _save_headers(path: Path, meta: SafetensorsRepoMetadata | None) -> None:
    files = None
    if meta is not None:
        files = {
            name: {
                "metadata": f.metadata,
                "tensors": {t: [i.dtype, i.shape, list(i.data_offsets)] for t, i in f.tensors.items()},
            }
            for name, f in meta.files_metadata.items()
        }
    write_json_atomic(path, {"safetensors": files, "index_metadata": meta.metadata if meta else None})


def _load_headers(path: Path) -> tuple[bool, SafetensorsRepoMetadata | None]:
    """(found, SafetensorsRepoMetadata or None): None with found=True means the repo has no safetensors."""
    from huggingface_hub.utils import SafetensorsFileMetadata, SafetensorsRepoMetadata, TensorInfo

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False, None
    if data.get("safetensors") is None:
        return True, None
    files = {
        name: SafetensorsFileMetadata(
            metadata=f["metadata"],
            tensors={t: TensorInfo(dtype=d, shape=s, data_offsets=tuple(o)) for t, (d, s, o) in f["tensors"].items()},
        )
        for name, f in data["safetensors"].items()
    }
    weight_map = {t: name for name, f in files.items() for t in f.tensors}
    return True, SafetensorsRepoMetadata(
        metadata=data.get("index_metadata"), sharded=len(files) > 1, weight_map=weight_map, files_metadata=files
    )


def safetensors_metadata(folder: str | Path):
    """The checkpoint's safetensors headers for a model folder: its own files, else (a snapshot fetched without
    weights) the headers `fetch` kept; None when neither is there."""
    folder = Path(folder)
    meta = local_safetensors(folder)
    commit = revision_of(folder)
    if meta is None and commit:
        meta = _load_headers(_headers_file(_repo_of(folder), commit))[1]
    return meta


def fetch(
    repo: str, revision: str | None = None, say: Callable[[str], None] = _quiet, cache_only: bool = False
) -> Path:
    """The snapshot folder of `repo` at `revision` in the HF cache, with the config files but no weights; the
    safetensors headers read (by range request) and kept for `safetensors_metadata`. `cache_only`: what the
    cache holds, never the network (a UserError when it holds nothing)."""
    from huggingface_hub import get_safetensors_metadata
    from huggingface_hub.errors import NotASafetensorsRepoError

    with _hub_logs_quiet():
        config, online = _config(repo, revision, cache_only)
        folder, commit = config.parent, config.parent.name
        if online:
            for name in (*SMALL_FILES, *_code_files(config)):
                if not (folder / name).is_file():
                    _optional(repo, commit, name)
        headers = _headers_file(repo, commit)
        if local_safetensors(folder) is not None or _load_headers(headers)[0]:
            return folder
        if not online:  # seen before without its headers: sized from the config alone until the hub answers
            if not cache_only:
                say(f"{repo}: no safetensors headers cached and the hub is not reachable; sizing from config.json")
            return folder
        try:
            with _hub_errors(repo, revision):
                meta = get_safetensors_metadata(repo, revision=commit)
        except NotASafetensorsRepoError:
            meta = None  # pytorch .bin or other formats: sized from the config alone
        _save_headers(headers, meta)
    return folder


def download(repo: str, revision: str | None = None, say: Callable[[str], None] = _quiet) -> Path:
    """The whole model (weights included) in the HF cache, with huggingface_hub's progress bar; only for the
    verbs that load it. Other weight formats are skipped when the repo has safetensors."""
    from huggingface_hub import constants, snapshot_download

    folder = fetch(repo, revision, say)
    has_safetensors = safetensors_metadata(folder) is not None
    missing = has_safetensors and local_safetensors(folder) is None
    no_weights = (
        f"the weights of {repo} are not in the local Hugging Face cache and it cannot download them "
        "(HF_HUB_OFFLINE, or no network)"
    )
    if missing and constants.HF_HUB_OFFLINE:
        raise UserError(no_weights)
    if missing:
        say(f"downloading {repo} ({folder.name[:8]}) into the Hugging Face cache")
    with _hub_logs_quiet(), _hub_errors(repo, revision):
        path = Path(
            snapshot_download(repo, revision=folder.name, ignore_patterns=OTHER_WEIGHTS if has_safetensors else None)
        )
    if has_safetensors and local_safetensors(path) is None:  # no network, with only the config files cached
        raise UserError(no_weights)
    return path

"""`--model ORG/NAME`: config files and safetensors headers from a Hub, never the weights for an estimate.

A real Hub-compatible server runs on loopback (olah, offline, serving git repositories built here; see
tests/hub_server.py) with HF_ENDPOINT pointed at it, behind a gate that refuses gated repositories the way
huggingface.co does. Nothing here touches the internet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hub_server import Gate, Olah, free_port, git_commit

TOKEN = "hf_infertune_test_token"


class Hub:
    def __init__(self, root: Path):
        from tests.conftest import build_tiny_model

        self.mirrors = root / "mirrors"
        self.sharded = self.mirrors / "models" / "acme" / "sharded"
        build_tiny_model(self.sharded, dtype="bfloat16", max_shard_size="100KB")
        self.first = git_commit(self.sharded, "first")
        cfg = json.loads((self.sharded / "config.json").read_text())
        cfg["max_position_embeddings"] = 2048  # a second revision that a pinned first one must not see
        (self.sharded / "config.json").write_text(json.dumps(cfg, indent=2))
        self.main = git_commit(self.sharded, "longer context")
        self.mixed = self.mirrors / "models" / "acme" / "mixed"
        self.mixed_counts = _mixed_dtype_repo(root / "tiny", self.mixed)
        self.mixed_commit = git_commit(self.mixed, "mixed dtypes")
        gated = self.mirrors / "models" / "acme" / "gated"
        shutil.copytree(self.mixed, gated, ignore=shutil.ignore_patterns(".git"))
        self.gated_commit = git_commit(gated, "gated")
        custom = self.mirrors / "models" / "acme" / "custom"  # a config class of its own (remote code)
        custom.mkdir(parents=True)
        (custom / "configuration_tiny.py").write_text(
            "from transformers import LlamaConfig\n\n\nclass TinyCustomConfig(LlamaConfig):\n"
            "    model_type = 'tiny_custom'\n"
        )
        (custom / "config.json").write_text(
            json.dumps(
                {**cfg, "model_type": "tiny_custom", "auto_map": {"AutoConfig": "configuration_tiny.TinyCustomConfig"}}
            )
        )
        git_commit(custom, "remote code")
        self.olah = Olah(self.mirrors, root / "olah")
        self.gate = None
        try:
            self.olah.wait_ready("/acme/sharded/resolve/main/config.json")
            self.gate = Gate(self.olah.port, gated={"acme/gated"}, token=TOKEN)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.gate is not None:
            self.gate.stop()
        self.olah.stop()


def _mixed_dtype_repo(scratch: Path, repo: Path) -> dict[str, int]:
    """One safetensors file whose norms are float32 and the rest bfloat16 (as some published checkpoints
    are); returns the elements per safetensors dtype, counted from the tensors themselves."""
    import torch
    from safetensors.torch import load_file, save_file

    from tests.conftest import build_tiny_model

    build_tiny_model(scratch, dtype="bfloat16")
    tensors = {k: (v.float() if "norm" in k else v) for k, v in load_file(scratch / "model.safetensors").items()}
    repo.mkdir(parents=True)
    save_file(tensors, repo / "model.safetensors", metadata={"format": "pt"})
    shutil.copy(scratch / "config.json", repo / "config.json")
    counts: dict[str, int] = {}
    for t in tensors.values():
        key = {torch.float32: "F32", torch.bfloat16: "BF16"}[t.dtype]
        counts[key] = counts.get(key, 0) + t.numel()
    return counts


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    h = Hub(tmp_path_factory.mktemp("hub"))
    try:
        yield h
    finally:
        h.stop()


def infertune(*args, endpoint: str, tmp: Path, offline: bool = False, token: str | None = None):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_TOKEN")}
    env.update(
        HF_ENDPOINT=endpoint,
        HF_HUB_CACHE=str(tmp / "hf-cache"),
        INFERTUNE_HOME=str(tmp / "home"),
        HF_MODULES_CACHE=str(tmp / "hf-modules"),
        HF_HUB_OFFLINE="1" if offline else "0",
        HF_HUB_DISABLE_TELEMETRY="1",
    )
    if token:
        env["HF_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "infertune", *args], capture_output=True, text=True, env=env, timeout=600
    )


def one_line_error(r, needle: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr


def weight_files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.name.endswith(".safetensors")]


ESTIMATE = ("estimate", "--gpu", "A100 80GB", "--input-len", "1k", "--format", "json")


def test_estimate_by_hub_id_matches_the_local_folder_without_the_weights(hub, tmp_path):
    r = infertune(*ESTIMATE, "--model", "acme/sharded", endpoint=hub.gate.url, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    by_id = json.loads(r.stdout)
    local = json.loads(infertune(*ESTIMATE, "--model", str(hub.sharded), endpoint=hub.gate.url, tmp=tmp_path).stdout)
    assert by_id["model"] == "acme/sharded" and by_id["model_revision"] == hub.main
    assert local["model_revision"] is None
    strip = ("model", "model_revision")
    assert {k: v for k, v in by_id.items() if k not in strip} == {k: v for k, v in local.items() if k not in strip}
    assert by_id["memory"]["weights_bytes"] > 0
    assert weight_files(tmp_path / "hf-cache") == []  # config, index: yes; weights: no
    shards = [(m, p, rng) for m, p, rng in hub.gate.requests if m == "GET" and p.endswith(".safetensors")]
    assert len(shards) >= 2 and all(rng and rng.startswith("bytes=0-") for _, _, rng in shards)  # headers only

    # Seen once: the same answer offline, and with the hub unreachable.
    for env in ({"offline": True, "endpoint": hub.gate.url}, {"endpoint": f"http://127.0.0.1:{free_port()}"}):
        again = infertune(*ESTIMATE, "--model", "acme/sharded", tmp=tmp_path, **env)
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout) == by_id


def test_profile_reads_exact_stored_dtypes(hub, tmp_path):
    args = ("profile", "--format", "json", "--model")
    r = infertune(*args, "acme/mixed", endpoint=hub.gate.url, tmp=tmp_path)
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p["model_revision"] == hub.mixed_commit
    assert p["checkpoint_dtypes"] == hub.mixed_counts and set(hub.mixed_counts) == {"BF16", "F32"}
    assert p["checkpoint_bytes"] == 2 * hub.mixed_counts["BF16"] + 4 * hub.mixed_counts["F32"]
    local = json.loads(infertune(*args, str(hub.mixed), endpoint=hub.gate.url, tmp=tmp_path).stdout)
    assert {k: v for k, v in p.items() if k not in ("path", "model_revision")} == {
        k: v for k, v in local.items() if k not in ("path", "model_revision")
    }
    assert weight_files(tmp_path / "hf-cache") == []


def test_a_pinned_revision_describes_that_commit(hub, tmp_path):
    def profile(*extra):
        r = infertune(
            "profile", "--model", "acme/sharded", "--format", "json", *extra, endpoint=hub.gate.url, tmp=tmp_path
        )
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    old, new = profile("--revision", hub.first), profile()
    assert (old["model_revision"], old["max_position_embeddings"]) == (hub.first, 1024)
    assert (new["model_revision"], new["max_position_embeddings"]) == (hub.main, 2048)
    r = infertune(
        "advise",
        "--no-input",
        "--model",
        "acme/sharded",
        "--revision",
        hub.first,
        "--gpu",
        "L4",
        "--format",
        "json",
        endpoint=hub.gate.url,
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_revision"] == hub.first


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--model", "acme/no-such-model"], "not found on"),
        (["--model", "acme/sharded", "--revision", "no-such-branch"], "no revision 'no-such-branch'"),
    ],
)
def test_unknown_model_or_revision_is_one_line(hub, tmp_path, args, needle):
    one_line_error(infertune("estimate", "--gpu", "L4", *args, endpoint=hub.gate.url, tmp=tmp_path), needle)


def test_no_network_and_offline_are_one_line(hub, tmp_path):
    r = infertune(*ESTIMATE, "--model", "acme/sharded", endpoint=f"http://127.0.0.1:{free_port()}", tmp=tmp_path)
    one_line_error(r, "cannot reach")
    r = infertune(*ESTIMATE, "--model", "acme/sharded", endpoint=hub.gate.url, tmp=tmp_path, offline=True)
    one_line_error(r, "HF_HUB_OFFLINE is set")


def test_measure_offline_without_the_weights_is_one_line(hub, tmp_path):
    assert infertune(*ESTIMATE, "--model", "acme/sharded", endpoint=hub.gate.url, tmp=tmp_path).returncode == 0
    r = infertune(
        "measure", "--model", "acme/sharded", "--max-new-tokens", "2", endpoint=hub.gate.url, tmp=tmp_path, offline=True
    )
    one_line_error(r, "the weights of acme/sharded are not in the local Hugging Face cache")


def test_gated_model_needs_a_token_with_access(hub, tmp_path):
    r = infertune(*ESTIMATE, "--model", "acme/gated", endpoint=hub.gate.url, tmp=tmp_path)
    one_line_error(r, "acme/gated is gated")
    assert "https://huggingface.co/acme/gated" in r.stderr and "HF_TOKEN" in r.stderr
    r = infertune(*ESTIMATE, "--model", "acme/gated", endpoint=hub.gate.url, tmp=tmp_path, token="hf_wrong")
    one_line_error(r, "has no access")
    r = infertune(*ESTIMATE, "--model", "acme/gated", endpoint=hub.gate.url, tmp=tmp_path, token=TOKEN)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_revision"] == hub.gated_commit
    assert weight_files(tmp_path / "hf-cache") == []


def test_remote_code_is_fetched_and_runs_only_when_asked_for(hub, tmp_path):
    args = ("profile", "--model", "acme/custom", "--format", "json")
    env = {"endpoint": hub.gate.url, "tmp": tmp_path}
    one_line_error(infertune(*args, **env), "--trust-remote-code")
    r = infertune(*args, "--trust-remote-code", **env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["model_type"] == "tiny_custom"


def test_doctor_env_records_the_revision(hub, tmp_path):
    r = infertune("doctor", "--env", "--model", "acme/sharded", "--format", "json", endpoint=hub.gate.url, tmp=tmp_path)
    assert r.returncode in (0, 1), r.stderr  # 1: findings about this machine
    assert json.loads(r.stdout)["model_revision"] == hub.main
    assert weight_files(tmp_path / "hf-cache") == []
    # A static check of a script reads the cache only: not one request, even for a model not seen before.
    script = tmp_path / "app.py"
    script.write_text(
        'from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained("acme/mixed")\n'
    )
    before = len(hub.gate.requests)
    r = infertune("doctor", str(script), "--format", "json", endpoint=hub.gate.url, tmp=tmp_path)
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["files"] == 1 and len(hub.gate.requests) == before


def test_measure_downloads_the_weights_through_the_cache(hub, tmp_path):
    assert weight_files(tmp_path / "hf-cache") == []
    r = infertune(
        "measure",
        "--model",
        "acme/sharded",
        "--max-new-tokens",
        "2",
        "--repeats",
        "1",
        "--warmup",
        "0",
        "--dtype",
        "float32",
        "--format",
        "json",
        endpoint=hub.gate.url,
        tmp=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["status"] == "ok" and m["model_revision"] == hub.main
    assert m["model_path"].endswith(hub.main)
    on_disk = sorted(p.name for p in weight_files(tmp_path / "hf-cache"))
    index = json.loads((hub.sharded / "model.safetensors.index.json").read_text())
    assert on_disk == sorted(set(index["weight_map"].values()))


def test_local_safetensors_headers_read_as_huggingface_hub_reads_them(tiny_model, tmp_path):
    """The warm path reads the headers itself (huggingface_hub's reader comes with its whole client, ~0.3 s to
    import): the result must be the library's own, for one file and for shards with an index."""
    from huggingface_hub import get_local_safetensors_metadata

    from infertune.models.hub import local_safetensors
    from tests.conftest import build_tiny_model

    sharded = build_tiny_model(tmp_path / "sharded", dtype="bfloat16", max_shard_size="100KB")
    assert len(list(sharded.glob("*.safetensors"))) > 1
    for folder in (tiny_model, sharded):
        assert local_safetensors(folder) == get_local_safetensors_metadata(folder)
    (sharded / sorted(sharded.glob("*.safetensors"))[0].name).write_bytes(b"\xff" * 16)  # a damaged shard
    assert local_safetensors(sharded) is None
    (tmp_path / "empty").mkdir()
    assert local_safetensors(tmp_path / "empty") is None

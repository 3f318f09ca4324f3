import json
import shutil

import pytest

from infertune.core.errors import UserError
from infertune.models import store


def test_local_folder_resolves_to_itself(tiny_model):
    assert store.resolve(str(tiny_model)) == tiny_model


def test_bad_model_specs_are_user_errors(tmp_path, infertune_home):
    with pytest.raises(UserError, match="without config.json"):
        store.resolve(str(tmp_path))
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(UserError, match="is a file"):
        store.resolve(str(f))
    with pytest.raises(UserError, match="not in the local Hugging Face cache"):
        store.resolve("no-such-org/no-such-model-xyz")
    with pytest.raises(UserError, match="not prepared"):
        store.resolve("demo", prepare_missing=False)
    with pytest.raises(UserError, match="unknown embedded model"):
        store.embedded("gpt-17")


def test_manifest_detects_corruption(tiny_model, tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(tiny_model, folder)
    assert store.verify(folder) == "no valid manifest"
    store.write_manifest(folder, {"name": "m"})
    assert store.verify(folder) == "ok"
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, different content: only the checksum can tell
    weights.write_bytes(bytes(data))
    assert store.verify(folder, checksums=False) == "ok"
    assert "sha256" in store.verify(folder)
    (folder / "extra.txt").write_text("stray")
    assert "differ" in store.verify(folder)


def _fake_convert(files):
    def convert(gguf, out, dtype, say):
        out.mkdir(parents=True)
        for name, content in files.items():
            if content is None:
                raise RuntimeError("disk full")  # fail half-way, like a crash during save
            (out / name).write_text(content)

    return convert


def test_prepare_is_atomic_and_idempotent(infertune_home, tmp_path, monkeypatch):
    gguf = tmp_path / "fake.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(store, "_locate_gguf", lambda model, install: gguf)
    monkeypatch.setattr(store, "version", lambda pkg: "0.0-test")

    # A failure half-way leaves nothing that looks prepared, and no temp folder behind.
    monkeypatch.setattr(store, "_convert", _fake_convert({"config.json": "{}", "model.safetensors": None}))
    with pytest.raises(RuntimeError):
        store.prepare("smollm2")
    assert not (store.models_dir() / "smollm2").exists()
    assert list(store.models_dir().iterdir()) == []
    assert store.list_prepared() == []

    monkeypatch.setattr(store, "_convert", _fake_convert({"config.json": "{}", "model.safetensors": "w"}))
    path = store.prepare("demo")
    assert path == store.models_dir() / "smollm2"
    manifest = json.loads((path / store.MANIFEST).read_text())
    assert manifest["source"]["sha256"] == store._sha256(gguf)
    [listed] = store.list_prepared()
    assert listed.status == "ok" and listed.name == "smollm2"

    # Prepared once: a second call converts nothing.
    monkeypatch.setattr(store, "_convert", lambda *a: pytest.fail("converted twice"))
    assert store.prepare("smollm2") == path
    assert store.resolve("demo") == path

    # A damaged folder is noticed and rebuilt.
    (path / "model.safetensors").write_text("x")  # same size, other bytes
    monkeypatch.setattr(store, "_convert", _fake_convert({"config.json": "{}", "model.safetensors": "w"}))
    assert store.list_prepared()[0].status != "ok"
    assert store.prepare("smollm2") == path and store.verify(path) == "ok"


def test_hub_ids_and_snapshot_revisions(tmp_path, infertune_home):
    from infertune.models import hub

    commit = "0123456789abcdef0123456789abcdef01234567"
    assert hub.revision_of(tmp_path / "hub" / "models--acme--tiny" / "snapshots" / commit) == commit
    assert hub.revision_of(tmp_path / "models--acme--tiny" / "snapshots" / "main") is None
    assert hub.revision_of(tmp_path / commit) is None  # a local folder, however named
    assert hub.is_hub_id("meta-llama/Llama-3.1-8B") and hub.is_hub_id("acme/tiny.v2")
    assert not hub.is_hub_id("gpt2") and not hub.is_hub_id("a/b/c") and not hub.is_hub_id("../x")
    with pytest.raises(UserError, match=r"hub id \(ORG/NAME\)"):
        store.resolve("no-such-thing")

"""A model seen before is profiled from the cache: no torch, no transformers, the same answer; the command line's
profile, estimate and advise then start without typer and rich either (start-up: benchmarks/estimate_startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from infertune.probe import model as probe_model
from infertune.probe.model import profile_model

SCRIPT = """
import json, sys
from infertune import api
from infertune.probe.model import profile_model
prof = profile_model(sys.argv[1])
e = api.estimate(model=sys.argv[1], cpu=True, input_len="64", max_new_tokens="8")
a = api.advise(model=sys.argv[1], input_len="64", max_new_tokens="8", concurrency=1, batch=1)
print(json.dumps({"imported": sorted(m for m in ("torch", "transformers", "accelerate") if m in sys.modules),
                  "params": prof.num_parameters, "kv": e.memory.kv_cache_bytes, "weights": e.memory.weights_bytes}))
"""


HEAVY = {"torch", "transformers", "accelerate"}


def _env(home) -> dict:
    env = {**os.environ, "INFERTUNE_HOME": str(home)}
    env.pop("INFERTUNE_NO_CALIBRATION")  # the cached host calibration is read too, as a user's estimate reads it
    return env


def _run(folder, home) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(folder)], env=_env(home), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _cli_imports(home, *args) -> set[str]:
    """The top-level packages `python -m infertune ARGS` imported (read from -X importtime), as a user runs it."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "infertune", *args],
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in out.stderr.splitlines()
        if line.startswith("import time:")
    }


def _calibrated(home) -> None:
    """This host's calibration in the cache (made-up rates: measuring takes seconds), keyed as a real one."""
    from infertune.core.paths import write_json_atomic
    from infertune.estimate import calibration, microbench, rates

    table = {str(r): 1e-9 for r in microbench.ROWS}
    cal = rates.Calibration(
        device="cpu",
        host_key=calibration.host_key("cpu"),
        measured_at=0.0,
        copy_Bps=1e10,
        linear_s_per_elem=dict.fromkeys(microbench.DTYPES, table),
        step_s=dict.fromkeys(microbench.ATTNS, 0.001),
        layer_s=dict.fromkeys(microbench.ATTNS, 0.0001),
    )
    write_json_atomic(calibration.cache_path("cpu"), cal.model_dump(mode="json"))


def test_profile_estimate_and_advise_on_a_model_seen_before_import_neither_torch_nor_transformers(
    tiny_model, infertune_home
):
    _calibrated(infertune_home)
    first = _run(tiny_model, infertune_home)  # first sight: meta-device count, CPU probe; both cached
    assert "transformers" in first["imported"] and "torch" in first["imported"]
    assert list((infertune_home / "profiles").glob("*.json")) and (infertune_home / "cpu-probe.json").is_file()
    again = _run(tiny_model, infertune_home)
    assert again["imported"] == []
    assert {k: again[k] for k in ("params", "kv", "weights")} == {k: first[k] for k in ("params", "kv", "weights")}
    # the command line: these verbs start without typer and rich too (infertune.cli.quick), JSON or table
    for verb in ("profile", "estimate", "advise"):
        found = _cli_imports(infertune_home, verb, "--model", str(tiny_model), "--format", "json")
        assert not found & (HEAVY | {"typer", "rich", "numpy"}), (verb, found & (HEAVY | {"typer", "rich", "numpy"}))
    table = _cli_imports(infertune_home, "estimate", "--model", str(tiny_model))
    assert "rich" in table and not table & (HEAVY | {"typer"})
    assert "typer" in _cli_imports(infertune_home, "estimate", "--help")  # what the quick way leaves to typer


def test_the_cache_key_is_the_config_and_the_transformers_version(monkeypatch, tmp_path, infertune_home):
    import importlib.metadata

    a = probe_model._cache_file(b'{"model_type": "llama"}', False)
    assert a == probe_model._cache_file(b'{"model_type": "llama"}', False)
    assert a != probe_model._cache_file(b'{"model_type": "llama", "num_hidden_layers": 3}', False)
    assert a != probe_model._cache_file(b'{"model_type": "llama"}', True)
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.0.1" if name == "transformers" else real(name))
    assert a != probe_model._cache_file(b'{"model_type": "llama"}', False)  # another transformers: profile again


def test_a_damaged_cache_entry_is_profiled_again(tiny_model, infertune_home):
    p = profile_model(tiny_model)
    (entry,) = (infertune_home / "profiles").glob("*.json")
    entry.write_text("{not json")
    assert profile_model(tiny_model) == p
    assert json.loads(entry.read_text())["num_parameters"] == p.num_parameters  # rewritten


def test_a_config_dict_profiles_like_its_folder(tiny_model, infertune_home):
    folder = profile_model(tiny_model)
    as_dict = profile_model(json.loads((tiny_model / "config.json").read_text()))
    assert as_dict.num_parameters == folder.num_parameters and as_dict.cache_groups == folder.cache_groups
    assert as_dict.path == "-" and as_dict.checkpoint_bytes == 0

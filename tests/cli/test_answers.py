"""Kept answers (infertune.cli.answers): a warm `estimate`/`profile` prints what the same command printed before,
without importing pydantic, and never once anything it was computed from has changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import build_tiny_model

# Runs the CLI as `python -m infertune` does, then says on stderr whether pydantic was imported.
RUN = (
    "import runpy, sys\n"
    "sys.argv = ['infertune', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('infertune', run_name='__main__')\n"
    "finally:\n    sys.stderr.write('\\npydantic imported: %s\\n' % ('pydantic' in sys.modules))\n"
)


@pytest.fixture()
def folder(tmp_path) -> Path:
    return build_tiny_model(tmp_path / "tiny")


def run(home: Path, *args: str) -> tuple[int, str, bool]:
    env = {**os.environ, "INFERTUNE_HOME": str(home)}
    env.pop("INFERTUNE_NO_ANSWER_CACHE", None)
    done = subprocess.run([sys.executable, "-c", RUN, *args], env=env, capture_output=True, text=True, timeout=300)
    return done.returncode, done.stdout, "pydantic imported: True" in done.stderr


def test_an_estimate_asked_again_is_replayed_without_pydantic(tmp_path, folder):
    args = ("estimate", "--model", str(folder), "--cpu", "--format", "json")
    code, first, heavy = run(tmp_path / "home", *args)
    assert code == 0 and heavy
    assert len(list((tmp_path / "home" / "answers").glob("estimate-*.json"))) == 1
    code, again, heavy = run(tmp_path / "home", *args)
    assert code == 0 and again == first and not heavy
    # another question is answered afresh, and its answer differs
    code, other, heavy = run(tmp_path / "home", *args, "--batch", "4")
    assert code == 0 and heavy and json.loads(other)["settings"]["batch"] == 4 != json.loads(first)["settings"]["batch"]


def test_a_changed_model_is_estimated_again(tmp_path, folder):
    args = ("estimate", "--model", str(folder), "--cpu", "--format", "json")
    _, first, _ = run(tmp_path / "home", *args)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["num_hidden_layers"] = 4
    (folder / "config.json").write_text(json.dumps(cfg))
    code, again, heavy = run(tmp_path / "home", *args)
    assert code == 0 and heavy
    assert json.loads(again)["memory"]["kv_cache_bytes"] == 2 * json.loads(first)["memory"]["kv_cache_bytes"]


def test_the_table_and_a_profile_are_replayed_as_printed(tmp_path, folder):
    for args in (("estimate", "--model", str(folder), "--cpu"), ("profile", "--model", str(folder))):
        code, first, _ = run(tmp_path / "home", *args)
        code2, again, heavy = run(tmp_path / "home", *args)
        assert code == code2 == 0 and again == first and first.strip() and not heavy


def test_advice_is_replayed_unless_it_reads_a_measured_run(tmp_path, folder):
    args = ("advise", "--model", str(folder), "--no-input", "--input-len", "2k", "--format", "json")
    code, first, _ = run(tmp_path / "home", *args)
    code2, again, heavy = run(tmp_path / "home", *args)
    assert code == code2 == 0 and again == first and json.loads(first)["kind"] == "advice" and not heavy
    run(tmp_path / "home", *args, "--measured", str(tmp_path / "no-such-run"))
    assert len(list((tmp_path / "home" / "answers").glob("advise-*.json"))) == 1


def test_failures_and_turned_off_runs_are_not_kept(tmp_path, folder):
    code, _, _ = run(tmp_path / "home", "estimate", "--model", str(folder), "--cpu", "--batch", "0")
    assert code == 2
    assert not list((tmp_path / "home").glob("answers/*.json"))
    env = {**os.environ, "INFERTUNE_HOME": str(tmp_path / "home"), "INFERTUNE_NO_ANSWER_CACHE": "1"}
    subprocess.run(
        [sys.executable, "-m", "infertune", "estimate", "--model", str(folder), "--cpu"],
        env=env,
        capture_output=True,
        check=True,
        timeout=300,
    )
    assert not list((tmp_path / "home").glob("answers/*.json"))

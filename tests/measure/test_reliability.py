"""Bad files and safety defaults (docs/reliability.md lists every fault and the test that covers it)."""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

from infertune.core.config import InferenceConfig
from infertune.serving.server import ServeProcess

SRC = Path(__file__).parents[2] / "src" / "infertune"


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "infertune", *args], capture_output=True, text=True, timeout=timeout)


def test_a_corrupt_safetensors_header_is_a_trial_error_not_a_traceback(tiny_model, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model, broken)
    next(broken.glob("*.safetensors")).write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a header}")
    prof = run("profile", "--model", str(broken), "--format", "json")  # config.json alone still profiles
    assert prof.returncode == 0 and json.loads(prof.stdout)["num_parameters"] > 0
    m = run("measure", "--model", str(broken), "--max-new-tokens", "2", "--warmup", "0", "--format", "json")
    d = json.loads(m.stdout)
    assert m.returncode == 0 and d["status"] == "error" and "header" in d["error"] and "Traceback" not in m.stderr


def test_remote_code_runs_only_when_asked_for(tiny_model):
    assert "trust_remote_code" not in InferenceConfig().from_pretrained_kwargs("cpu")
    assert InferenceConfig(trust_remote_code=True).from_pretrained_kwargs("cpu")["trust_remote_code"] is True
    m = run("measure", "--model", str(tiny_model), "--max-new-tokens", "2", "--warmup", "0", "--format", "json")
    assert json.loads(m.stdout)["config"]["trust_remote_code"] is False


def test_servers_bind_loopback_by_default(tmp_path):
    cmd = ServeProcess(["m"], tmp_path / "log").cmd
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"


def test_no_subprocess_runs_through_a_shell():
    """User input (model paths, flags) never reaches a shell: no shell=True anywhere in the package."""
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for k in node.keywords:
                    assert not (k.arg == "shell" and isinstance(k.value, ast.Constant) and k.value.value), path


def test_a_full_disk_stops_the_run_with_one_line_and_keeps_what_was_written(tmp_path):
    import pytest

    from infertune.core.errors import UserError
    from infertune.tuning.run import Run

    run = Run(tmp_path)
    (tmp_path / "results.jsonl").symlink_to("/dev/full")  # every write: ENOSPC
    with pytest.raises(UserError, match="disk full.*--resume"):
        run.append(_any_step())


def _any_step():
    from infertune.core.workload import Workload
    from infertune.measure.results import TrialResult
    from infertune.techniques import Setup
    from infertune.tuning.run import Step

    trial = TrialResult(status="error", error="x", config=InferenceConfig(), workload=Workload(), model_path="m")
    return Step(
        index=0,
        technique=None,
        changes={},
        setup=Setup(),
        expected=None,
        trial=trial,
        quality=None,
        objective=None,
        accepted=False,
        reason="x",
    )


def test_every_test_the_reliability_table_names_exists():
    import re

    doc = (Path(__file__).parents[2] / "docs" / "reliability.md").read_text()
    named = re.findall(r"(test_\w+\.py)::(test_\w+)", doc)
    assert len(named) >= 20
    for file, name in named:
        found = list((Path(__file__).parents[1]).rglob(file))
        assert len(found) == 1 and f"def {name}(" in found[0].read_text(), f"{file}::{name}"

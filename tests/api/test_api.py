"""docs/api.md's examples run as written (on the embedded model), and the API returns what the CLI prints."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import infertune
from infertune.core.errors import UserError

API_MD = Path(__file__).parents[2] / "docs" / "api.md"
EXAMPLES = [b for b in re.findall(r"```python\n(.*?)```", API_MD.read_text(), re.S) if "import infertune" in b]


def test_there_are_examples_for_every_verb_but_env():
    text = "".join(EXAMPLES)
    for verb in ("estimate", "advise", "measure", "doctor", "tune", "report"):
        assert f"infertune.{verb}(" in text


@pytest.mark.parametrize("code", EXAMPLES, ids=[re.search(r"infertune\.(\w+)\(", c).group(1) for c in EXAMPLES])
def test_doc_example_runs(code, demo_model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(API_MD), "exec"), {"__name__": "__doc_example__"})


def test_verbs_are_callable_modules_and_the_cli_prints_the_same_json(tiny_model):
    from infertune.estimate import Estimate  # the subpackage still imports as one

    e = infertune.estimate(model=str(tiny_model), input_len=256, cpu=True)
    assert isinstance(e, Estimate) and e.schema_version == "1"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "infertune",
            "estimate",
            "--model",
            str(tiny_model),
            "--input-len",
            "256",
            "--cpu",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    cli = json.loads(r.stdout)
    assert cli["memory"] == e.model_dump(mode="json")["memory"] and cli["kind"] == "estimate"
    sweep = infertune.estimate(model=str(tiny_model), input_len="256,1k", cpu=True)
    assert [x.settings.input_len for x in sweep.sweep] == [256, 1024]
    with pytest.raises(UserError, match="--dtype int3: takes auto"):
        infertune.estimate(model=str(tiny_model), dtype="int3")
    assert infertune.env().kind == "env"

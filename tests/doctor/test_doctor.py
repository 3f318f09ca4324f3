"""infertune doctor: each rule fires on the mistake and stays silent on the correct version of the same code."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from infertune import doctor
from infertune.doctor.env import check_environment
from infertune.doctor.output import rule_table
from infertune.doctor.rules import RULES
from infertune.probe.hardware import GPU, Hardware
from tests.doctor.cases import CASES, HEAD, check_code

DATA = Path(__file__).parents[1] / "data" / "doctor"


def test_suppression_by_id_or_name_on_any_line_of_the_call(tmp_path):
    code = (
        "m = AutoModelForCausalLM.from_pretrained(  # infertune: ignore[IT001]\n"
        '    "m", device_map="auto", trust_remote_code=True)  # infertune: ignore[trust-remote-code]'
    )
    assert check_code(tmp_path, code).findings == []
    assert [f.rule for f in check_code(tmp_path, code.replace("[IT001]", "[IT002]")).findings] == ["IT001"]


def test_sample_scripts_from_the_docs():
    bad = doctor.check([DATA / "bad_server.py"], select=["ALL"])
    assert {f.rule for f in bad.findings} >= {
        "IT002",
        "IT003",
        "IT004",
        "IT005",
        "IT006",
        "IT007",
        "IT008",
        "IT010",
        "IT011",
        "IT012",
        "IT013",
        "IT017",
    }
    assert "IT015" not in {f.rule for f in bad.findings}  # Qwen2.5-Instruct's generation_config.json samples
    assert doctor.check([DATA / "good.py"]).findings == []


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "infertune", "doctor", *args], capture_output=True, text=True, timeout=120
    )


def test_cli_text_json_and_exit_codes(tmp_path):
    r = run(str(DATA / "bad_server.py"))
    assert r.returncode == 1 and r.stdout.splitlines()[0].startswith(f"{DATA / 'bad_server.py'}:")
    first = r.stdout.splitlines()[0].split()
    assert first[0].count(":") == 2 and first[1].startswith("IT")  # file:line:col RULE message
    j = run(str(DATA / "bad_server.py"), str(DATA / "good.py"), "--format", "json")
    d = json.loads(j.stdout)
    assert j.returncode == 1 and d["files"] == 2 and d["schema_version"] == "1"
    assert set(d["findings"][0]) == {"path", "line", "col", "rule", "message", "fix"}
    clean = run(str(DATA / "good.py"))
    assert clean.returncode == 0 and clean.stdout == "" and "no findings in 1 file" in clean.stderr


def test_unreadable_input_is_one_clear_error(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n    pass\n")
    r = run(str(broken))
    assert r.returncode == 2 and "broken.py:1:7: syntax error" in r.stderr and "Traceback" not in r.stderr
    missing = run(str(tmp_path / "nope.py"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    binary = tmp_path / "b.py"
    binary.write_bytes(b"\xff\xfe\x00")
    assert run(str(binary)).returncode == 2
    assert run().returncode == 2  # nothing to check


def test_settings_of_a_script_become_an_advise_run(tmp_path, tiny_model):
    s = tmp_path / "app.py"
    s.write_text(
        HEAD + f'model = AutoModelForCausalLM.from_pretrained("{tiny_model}", dtype=torch.float32, '
        'device_map="auto", attn_implementation="eager")\n'
        'inputs = {"input_ids": torch.tensor([[1, 2]])}\n'
        'out = model.generate(**inputs, max_new_tokens=64, cache_implementation="static")\n'
    )
    assert doctor.settings(doctor.parse(s)) == {
        "model": str(tiny_model),
        "dtype": "float32",
        "attn": "eager",
        "device_map": "auto",
        "max_new_tokens": "64",
        "kv_cache": "static",
        "compile": True,
    }
    r = run(str(s), "--advise", "--format", "json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)["advice"]
    assert row["command"].startswith("infertune advise --no-input --model ")
    advice = row["advice"]
    assert advice["kind"] == "advice" and advice["current"]["dtype"] == "float32"
    assert advice["current"]["attn"] == "eager" and advice["current"]["kv_cache"] == "static"
    assert "--device-map auto" in row["command"] and advice["current"]["device_map"] is None  # one GPU: one device
    nowhere = tmp_path / "other.py"
    nowhere.write_text(
        HEAD + 'model = AutoModelForCausalLM.from_pretrained("no-such/model", dtype="auto", device_map="auto")\n'
    )
    r = run(str(nowhere), "--advise")
    assert r.returncode == 0 and "cannot advise" in r.stderr and "Traceback" not in r.stderr


def _hw(gpus=(), mps=False):
    return Hardware(
        platform="Linux",
        cpu_model="x",
        cpu_logical_cores=2,
        cpu_physical_cores=2,
        ram_total_bytes=32 * 2**30,
        ram_available_bytes=16 * 2**30,
        gpus=list(gpus),
        mps=mps,
    )


def test_environment_checks_with_injected_facts():
    ok = {"torch": "2.6.0", "transformers": "5.2.0"}
    gpu = GPU(
        index=0,
        name="NVIDIA L4",
        total_memory_bytes=24 * 2**30,
        free_memory_bytes=22 * 2**30,
        compute_capability="8.9",
        bf16=True,
    )
    assert check_environment(_hw([gpu]), ok, lambda: True) == []
    rules = {
        f.rule: f for f in check_environment(_hw(), {**ok, "torch": "2.6.0+cpu", "flash-attn": "2.7"}, lambda: True)
    }
    assert set(rules) == {"ENV003", "ENV004", "ENV005"} and "CPU-only torch build" in rules["ENV003"].message
    assert [f.rule for f in check_environment(_hw(), {"torch": None, "transformers": None}, lambda: False)] == [
        "ENV001",
        "ENV001",
        "ENV004",
    ]
    big = check_environment(_hw([gpu]), ok, lambda: True, model_bytes=30 * 2**30, model="big")
    assert [f.rule for f in big] == ["ENV006"] and "22.0 GiB free" in big[0].message
    # the installed transformers' own torch requirement, read from its metadata, against an old torch
    old = check_environment(_hw([gpu]), {"torch": "1.13.0", "transformers": "5.2.0"}, lambda: True)
    assert [f.rule for f in old] == ["ENV002"] and "transformers" in old[0].message


def test_pins_beside_or_above_the_script_choose_the_dtype_message(tmp_path):
    app = tmp_path / "svc" / "app"
    app.mkdir(parents=True)
    script = app / "main.py"
    script.write_text(
        HEAD + 'm = AutoModelForCausalLM.from_pretrained("m", device_map="auto")\n'
        'n = AutoModelForCausalLM.from_pretrained("m2", torch_dtype=torch.float16, device_map="auto")\n'
        'o = AutoModelForCausalLM.from_pretrained("m3", dtype=torch.float16, device_map="auto")\n'
    )
    (tmp_path / "svc" / "requirements.txt").write_text("accelerate\ntransformers==4.46.3\n")
    v4 = {f.line: f.message for f in doctor.check([script]).findings}
    assert list(v4) == [3, 5] and "4.x" in v4[3] and "requirements.txt" in v4[3] and "4.56" in v4[5]
    assert "pass torch_dtype=" in v4[3]  # the keyword this version reads
    (tmp_path / "svc" / "requirements.txt").unlink()
    (tmp_path / "svc" / "pyproject.toml").write_text('[project]\ndependencies = ["transformers>=5.0,<6"]\n')
    assert doctor.check([script]).findings == []  # 5.x: the checkpoint's dtype; torch_dtype still read
    # --target-version wins over the pins
    assert [f.line for f in doctor.check([script], target_version="4.40").findings] == [3, 5]


def test_version_ranges_from_specifiers():
    from infertune.doctor.version import spec_range

    assert spec_range(">=4.40,<5") == ((4, 40), (4, 9999))
    assert spec_range("==4.46.3") == ((4, 46, 3), (4, 46, 3))
    assert spec_range("~=4.46.0") == ((4, 46, 0), (4, 46, 9999))
    assert spec_range("^4.38") == ((4, 38), (4, 9999))
    assert spec_range(">=5") == ((5,), None)


def test_select_and_ignore_like_ruff(tmp_path):
    script = DATA / "bad_server.py"
    only = {f.rule for f in doctor.check([script], select=["IT01"]).findings}
    assert only and all(r.startswith("IT01") for r in only)
    assert "IT012" not in {f.rule for f in doctor.check([script], ignore=["trust-remote-code"]).findings}
    with pytest.raises(ValueError, match="unknown rule"):
        doctor.check([script], select=["IT999"])
    r = run(str(script), "--select", "IT012,IT001", "--format", "json")
    assert r.returncode == 1 and {f["rule"] for f in json.loads(r.stdout)["findings"]} == {"IT001", "IT012"}
    bad = run(str(script), "--select", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown rule" in bad.stderr


def test_sarif_output_validates_against_the_sarif_2_1_0_structure(tmp_path):
    import jsonschema

    schema = json.loads((DATA / "sarif-2.1.0-subset.schema.json").read_text())
    r = run(str(DATA / "bad_server.py"), "--format", "sarif")
    assert r.returncode == 1  # findings (an unreadable input is refused in one line: test_doctor_io.py)
    log = json.loads(r.stdout)
    jsonschema.validate(log, schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    run_ = log["runs"][0]
    ids = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
    assert ids == [r.id for r in RULES] and run_["results"]
    for res in run_["results"]:
        assert ids[res["ruleIndex"]] == res["ruleId"]
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].endswith("bad_server.py") and loc["region"]["startLine"] >= 1
    clean = json.loads(run(str(DATA / "good.py"), "--format", "sarif").stdout)
    jsonschema.validate(clean, schema)
    assert clean["runs"][0]["results"] == []
    clean["runs"][0]["tool"]["driver"]["ruleCount"] = 22  # not a SARIF property: the schema catches it
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(clean, schema)


def test_doctor_never_imports_torch_transformers_or_pydantic(tmp_path):
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "infertune", "doctor", str(DATA / "good.py")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    modules = {line.split("|")[-1].strip().split(".")[0] for line in r.stderr.splitlines() if "import time:" in line}
    assert "infertune" in modules and not modules & {"torch", "transformers", "pydantic", "typer", "rich", "numpy"}


def test_the_installed_command_is_a_plain_script_that_imports_no_re(tmp_path):
    """bin/infertune (pyproject's script-files) runs the same main as `python -m infertune`, without the `import re`
    of pip's console-script wrapper (about a third of the doctor's start-up: benchmarks/README.md)."""
    script = Path(__file__).parents[2] / "bin" / "infertune"
    command = [sys.executable, "-X", "importtime", str(script), "doctor", "--no-cache", str(DATA / "good.py")]
    env = {k: v for k, v in os.environ.items() if k != "INFERTUNE_NO_DOCTOR_CACHE"} | {"INFERTUNE_HOME": str(tmp_path)}
    subprocess.run(command, capture_output=True, timeout=60, env=env)  # (the first run keeps the compiled patterns)
    r = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 0, r.stderr
    modules = {line.split("|")[-1].strip() for line in r.stderr.splitlines() if "import time:" in line}
    assert "infertune.doctor.rules" in modules and "re" not in modules and "runpy" not in modules


def test_pre_commit_hooks_run_the_doctor_on_python_files():
    import yaml  # a transformers dependency

    hooks = yaml.safe_load((Path(__file__).parents[2] / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["infertune-doctor", "infertune-doctor-system"]
    for h in hooks:  # the keys pre-commit requires, and files it passes as arguments
        assert {"id", "name", "entry", "language"} <= set(h) and h["entry"] == "infertune doctor"
        assert h["types"] == ["python"] and h["language"] in ("python", "system")


def test_a_failing_rule_is_reported_and_the_others_still_run(tmp_path, monkeypatch):
    from infertune.doctor import rules as rules_mod

    def boom(s):
        raise ValueError("boom")
        yield

    broken = [rules_mod.Rule("IT012", "trust-remote-code", "x", "y", boom)] + rules_mod.RULES[:1]
    monkeypatch.setattr(rules_mod, "RULES", broken)
    monkeypatch.setattr("infertune.doctor.checker.select_rules", lambda select, ignore: broken)
    report = doctor.check([DATA / "bad_server.py"])
    assert [f.rule for f in report.findings] == ["IT001"]
    assert len(report.errors) == 1 and "rule IT012 failed (ValueError: boom)" in report.errors[0]


def test_folders_are_walked_without_tool_and_hidden_folders(tmp_path):
    for rel in ("pkg/a.py", "pkg/sub/b.py", ".venv/c.py", "build/d.py", ".hidden/e.py", "node_modules/f.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(HEAD)
    (tmp_path / "pkg" / "notes.txt").write_text("x")
    files, errors = doctor.python_files([tmp_path])
    assert sorted(f.relative_to(tmp_path).as_posix() for f in files) == ["pkg/a.py", "pkg/sub/b.py"] and not errors


def test_advisory_rules_are_off_unless_selected(tmp_path):
    """IT010, IT011 and IT047 were wrong more often than right on real scripts: they speak only when selected."""
    f = tmp_path / "s.py"
    advisory = (
        ("IT010", "hardcoded-sampling"),
        ("IT011", "generate-in-web-handler"),
        ("IT047", "timing-without-warmup"),
    )
    for rule, name in advisory:
        f.write_text(HEAD + textwrap.dedent(CASES[rule][0]) + "\n")
        assert rule not in {x.rule for x in doctor.check([f]).findings}
        for select in ([rule], [rule[:4]], [name], ["ALL"]):
            assert rule in {x.rule for x in doctor.check([f], select=select).findings}, select
    listed = [line for line in rule_table().splitlines() if "off by default" in line]  # --list-rules says so
    assert [line.split()[0] for line in listed] == ["IT010", "IT011", "IT047"]

"""The doctor's input rules and SARIF output: bad input is one line on stderr and exit 2 before any rule runs;
SARIF carries the tool's version and URIs that code-scanning UIs resolve."""

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import infertune
from infertune import doctor
from infertune.doctor.rules import RULES

DATA = Path(__file__).parents[1] / "data" / "doctor"
BAD = "from transformers import AutoModelForCausalLM\nm = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-2-7b-hf')\n"


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "infertune", "doctor", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def sarif_schema() -> dict:
    """The offline SARIF 2.1.0 subset (with a run's originalUriBaseIds and an artifactLocation's uriBaseId,
    SARIF 2.1.0 3.14.14 and 3.4.4)."""
    return json.loads((DATA / "sarif-2.1.0-subset.schema.json").read_text())


def one_line_refusal(r, needle):
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: ") and needle in r.stderr, r.stderr


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("broken.py", b"def f(:\n", "broken.py:1:7: syntax error"),
        ("dedent.py", b"def f():\n    x = 1\nreturn x\n", "dedent.py:3:1: syntax error: 'return' outside function"),
        ("latin.py", b"\xff\xfe\x00", "latin.py: not a UTF-8 text file"),
        ("nope.py", None, "nope.py: no such file or directory"),
        ("empty_dir", "dir", "no Python files to check"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, name, content, needle):
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
        (path / "notes.txt").write_text("not python")
    elif content is not None:
        path.write_bytes(content)
    for fmt in ("text", "json", "sarif"):
        one_line_refusal(run(str(path), "--format", fmt), needle)
    with pytest.raises(ValueError, match=needle.split(":")[-1].strip()):
        doctor.check([path])


def test_one_bad_path_refuses_the_whole_run(tmp_path):
    good = tmp_path / "app.py"
    good.write_text(BAD)
    assert run(str(good)).returncode == 1  # the good file alone has findings
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    one_line_refusal(run(str(good), str(broken)), "broken.py:1:7: syntax error")
    one_line_refusal(
        run(str(good), str(tmp_path / "a.py"), str(tmp_path / "b.py")), "a.py: no such file or directory (and 1 more)"
    )


def test_api_refuses_bad_input_as_a_user_error(tmp_path):
    from infertune.api.checkup import doctor as api_doctor
    from infertune.core.errors import UserError

    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    with pytest.raises(UserError, match="syntax error"):
        api_doctor([broken])


def test_sarif_has_version_rules_and_resolvable_uris(tmp_path):
    (tmp_path / "pkg").mkdir()
    inside = tmp_path / "pkg" / "app.py"
    inside.write_text(BAD)
    r = run("pkg/app.py", "--format", "sarif", cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    log = json.loads(r.stdout)
    jsonschema.validate(log, sarif_schema())
    assert log["version"] == "2.1.0"
    run_ = log["runs"][0]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "infertune" and driver["version"] == infertune.__version__
    for rule, r_ in zip(driver["rules"], RULES, strict=True):
        assert rule["id"] == r_.id and rule["name"] == r_.name
        assert rule["shortDescription"]["text"] and rule["helpUri"].startswith("https://")
    base = run_["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base == tmp_path.resolve().as_uri() + "/"
    assert run_["results"]
    for res in run_["results"]:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"] and res["level"] == "warning"
        loc = res["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "pkg/app.py", "uriBaseId": "%SRCROOT%"}
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1
    # a file outside the working folder: an absolute file:// URI, no base needed
    elsewhere = tmp_path / "pkg"
    out = json.loads(run(str(inside), "--format", "sarif", cwd=elsewhere / "..").stdout)
    assert out["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pkg/app.py"
    far = json.loads(run(str(inside), "--format", "sarif", cwd=DATA).stdout)
    loc = far["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": inside.resolve().as_uri()}


def test_env_alone_reads_no_file_and_is_not_refused():
    from infertune.api.checkup import doctor as api_doctor

    assert doctor.check([]).files == 0  # `doctor --env`: no paths is not "a folder with no Python file"
    assert api_doctor(env=True).files == 0


@pytest.mark.parametrize(
    "argv",
    [
        ["a.py"],
        ["a.py", "src", "--format", "json"],
        ["--format=sarif", "a.py", "--select", "IT001,IT004", "--select=IT01"],
        ["a.py", "--ignore", "IT012", "--target-version", "4.46", "--list-rules"],
        ["a.py", "--target-version=>=4.40,<5"],
    ],
)
def test_the_quick_reading_of_a_command_line_is_argparses(argv):
    """Plain command lines skip argparse (its import costs more than checking a file): same values."""
    from infertune.doctor.cli import parser, quick_args

    quick, full = quick_args(argv), parser().parse_args(argv)
    assert quick is not None
    assert {k: getattr(quick, k) for k in vars(full)} == vars(full)


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["a.py", "--format", "xml"], ["a.py", "--format"], ["a.py", "--sel", "IT001"], ["--env"], ["-h"]],
)
def test_anything_else_goes_to_argparse(argv):
    from infertune.doctor.cli import quick_args

    assert quick_args(argv) is None


def test_the_fast_path_imports_no_module_it_can_do_without():
    """A fresh check (--no-cache: every rule loaded and run) still leaves out the standard library's slow imports:
    argparse, json, typing, shutil, dataclasses (with inspect), pathlib (with urllib.parse)."""
    code = (
        "import sys; from infertune.__main__ import main\n"
        "sys.argv = ['infertune', 'doctor', '--no-cache', sys.argv[1]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "slow = ('argparse', 'json', 'typing', 'shutil', 'dataclasses', 'inspect', 'pathlib', 'urllib.parse')\n"
        "print(sorted(m for m in slow if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code, str(DATA / "bad_server.py")], capture_output=True, text=True)
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr

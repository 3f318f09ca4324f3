"""profile, estimate and advise start without typer (infertune.cli.quick) and answer exactly as the typer
commands do: the same flags, the same output, the same one-line errors and exit codes."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from infertune.cli import quick

# the typer app alone, never the quick way in: the reference the quick answers are checked against
TYPER = "import sys; sys.argv[0] = 'infertune'; from infertune.cli import main; main()"


def run(*args: str, typer: bool = False, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-c", TYPER, *args] if typer else [sys.executable, "-m", "infertune", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})


def typer_params(verb: str) -> dict:
    """The click parameters typer builds for `verb`: name -> the parameter."""
    import typer.main

    from infertune.cli import register
    from infertune.cli.app import app

    register(verb)
    group = typer.main.get_command(app)
    return {p.name: p for p in group.commands[verb].params}


@pytest.mark.parametrize("verb", ["profile", "estimate", "advise"])
def test_the_quick_flags_are_the_typer_commands_flags(verb):
    params = typer_params(verb)
    options = {n: p for n, p in params.items() if p.param_type_name == "option"}
    assert set(options) == set(quick.FLAGS[verb])
    for name, kind in quick.FLAGS[verb].items():
        p = options[name]
        assert p.opts == [quick.flag_name(name)] and not p.secondary_opts, name
        assert p.is_flag == (kind is bool), name
        assert p.multiple == (kind is list), name
        assert (getattr(p, "min", None) == 1) == (kind == quick.POSITIVE), name
        assert getattr(p, "max", None) is None and p.envvar is None, name
        annotation = {quick.POSITIVE: int, list: list[str]}.get(kind, kind)
        assert p.type_descriptor.annotation == annotation, name
    positional = {n: p for n, p in params.items() if p.param_type_name == "argument"}
    assert set(positional) == ({quick.POSITIONAL[verb]} if verb in quick.POSITIONAL else set())
    assert all(p.type_descriptor.annotation is Path and p.nargs == 1 for p in positional.values())


@pytest.mark.parametrize("verb, api_name", [("estimate", "estimate"), ("advise", "advise")])
def test_flags_left_out_take_the_same_defaults_as_in_the_typer_command(verb, api_name):
    """The quick way passes only the flags given; the API's defaults must then be the command's."""
    from infertune import api
    from infertune.cli import plan

    command = inspect.signature(getattr(plan, verb)).parameters
    api_params = inspect.signature(getattr(api, api_name)).parameters
    for name in quick.FLAGS[verb].keys() - {"fmt", "no_input"}:
        assert command[name].default == api_params[name].default, name
    assert command["fmt"].default.value == inspect.signature(getattr(quick, verb)).parameters["fmt"].default


@pytest.mark.parametrize(
    "verb, args",
    [
        ("estimate", ["--model", "demo", "--format", "json", "--batch", "2", "--cpu"]),
        ("estimate", ["--batch", "0"]),  # the validation layer's refusal
        ("advise", ["--tp", "0"]),  # typer's range check
        ("estimate", ["--format=json", "--input-len", "1k,2k", "--gpu", "L4", "--max-memory=0=1GiB,cpu=8GiB"]),
        ("estimate", ["--gpu", "no-such-card", "--format", "json"]),  # the API's one line, exit 2
        ("estimate", ["--no-such-flag"]),
        ("profile", ["--format", "json", "--trust-remote-code"]),
        ("profile", ["--format", "yaml"]),
        (
            "advise",
            [
                "--model",
                "demo",
                "--gpu",
                "L4",
                "--lib",
                "bitsandbytes=0.39.1",
                "--lib",
                "torch=2.1",
                "--format",
                "json",
            ],
        ),
        ("advise", ["missing-workload.yaml", "--format", "json"]),
    ],
)
def test_quick_answers_exactly_as_typer_does(demo_model, verb, args):
    fast, slow = run(verb, *args), run(verb, *args, typer=True)
    assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr)
    if fast.returncode == 0:
        assert json.loads(fast.stdout)["kind"] in ("estimate", "profile", "advice")
    else:
        assert len(fast.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--batch", "-1"],
        ["--batch", "x"],
        ["--model"],
        ["--model", "--cpu"],
        ["--cpu=1"],
        ["--model", "a", "--model", "b"],
        ["stray"],
        ["--format", "xml"],
        ["--model", ""],
        ["-m", "x"],
    ],
)
def test_anything_but_a_plain_command_line_is_left_to_typer(args):
    assert quick.parse("estimate", args) is None


def test_plain_command_lines_parse_as_typer_converts_them():
    assert quick.parse("estimate", ["--model=demo", "--batch", "3", "--cpu", "--format", "json"]) == {
        "model": "demo",
        "batch": 3,
        "cpu": True,
        "fmt": "json",
    }
    assert quick.parse("advise", ["w.yaml", "--lib", "a=1", "--lib=b=2", "--measured", "m.json"]) == {
        "workload": Path("w.yaml"),
        "lib": ["a=1", "b=2"],
        "measured": Path("m.json"),
    }
    assert quick.parse("advise", ["a.yaml", "b.yaml"]) is None
    assert quick.parse("advise", ["--tp", "0"]) is None and quick.parse("advise", ["--tp", "2"]) == {"tp": 2}


@pytest.mark.parametrize(
    "msg",
    [
        "probing this CPU's bandwidth and FLOP/s",
        "reading the hardware",
        "a [bold]bracket[/bold] and :smile: codes",
        "a\ttab",
        "x" * 300,
    ],
)
def test_a_progress_line_off_a_terminal_is_the_line_rich_writes(msg, capsys):
    from infertune.cli import output

    quick.say(msg)
    fast = capsys.readouterr().err
    output.say(msg)
    assert fast == capsys.readouterr().err and fast.endswith("\n") and fast.count("\n") == 1

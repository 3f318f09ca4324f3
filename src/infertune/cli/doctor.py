"""doctor: the classic inference mistakes in a user's scripts (never run), the environment's, advice per script."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from infertune.cli.output import err, out, progress
from infertune.cli.plan_output import print_advice
from infertune.cli.quick import print_json


class DoctorFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"


def doctor(
    paths: Annotated[list[Path] | None, typer.Argument(help="Python files or folders to check")] = None,
    env: Annotated[bool, typer.Option("--env", help="also check this environment (versions, devices, memory)")] = False,
    advise_: Annotated[bool, typer.Option("--advise", help="then advise on each script's model and settings")] = False,
    gpu: Annotated[
        str | None,
        typer.Option(
            help="the GPU the scripts target (H100 SXM, T4, ...): sharpens the max_memory and FlashAttention rules"
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="with --env: check this model's weights against free memory")
    ] = None,
    fmt: Annotated[
        DoctorFormat, typer.Option("--format", help="text for people, json for programs, sarif for code scanning")
    ] = DoctorFormat.text,
    select: Annotated[list[str] | None, typer.Option(help="only these rules (ids, names, prefixes)")] = None,
    ignore: Annotated[list[str] | None, typer.Option(help="skip these rules (ids, names, prefixes)")] = None,
    target_version: Annotated[str | None, typer.Option(help="the transformers version the scripts run on")] = None,
) -> None:
    """Find the classic inference mistakes in your scripts, statically (never runs them). Exit 1 on findings.
    (Without --env/--advise/--gpu/--model, `infertune doctor` answers on a stdlib-only fast path: doctor/cli.py.)"""
    from infertune import __version__, api
    from infertune.doctor.cli import split

    with err.status("checking", spinner="dots") as status:
        result = api.doctor(
            paths,
            env,
            advise_,
            gpu,
            model,
            say=progress(status),
            select=split(select or []),
            ignore=split(ignore or []),
            target_version=target_version,
        )
    if fmt is DoctorFormat.sarif:
        import json

        from infertune.doctor.output import sarif

        print(json.dumps(sarif(result.findings, result.errors, __version__), indent=2))
    elif fmt is DoctorFormat.json:
        print_json(result)
    else:
        for f in result.findings:
            out.print(
                f"{escape(f.path)}:{f.line}:{f.col} [bold]{f.rule}[/bold] {escape(f.message)}",
                highlight=False,
                soft_wrap=True,
            )
            out.print(f"    fix: {f.fix}", style="dim", markup=False, highlight=False, soft_wrap=True)
        for e in result.errors:
            err.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        n = len(result.findings)
        scope = " and ".join(
            ([f"{result.files} file{'s' * (result.files != 1)}"] if result.files else [])
            + (["the environment"] if env else [])
        )
        if scope:  # nothing read (every input an error): the errors above are the whole answer
            err.print(f"{n} finding{'s' * (n != 1)} in {scope}" if n else f"no findings in {scope}")
        for a in result.advice or []:
            said = " ".join(x for x in (a.command, a.error) if x)
            err.print(f"[bold]{escape(a.path)}[/bold]: {escape(said)}", highlight=False, soft_wrap=True)
            if a.advice is not None:
                print_advice(a.advice)
    if result.errors:
        raise typer.Exit(2)
    if result.findings:
        raise typer.Exit(1)

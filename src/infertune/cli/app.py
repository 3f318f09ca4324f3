"""The typer app, the options several verbs share, and `main` (exit codes and error lines: `exits`)."""

from __future__ import annotations

from typing import Annotated

import typer

from infertune.cli.exits import guard
from infertune.cli.quick import Format

app = typer.Typer(
    help="Pick, prove and ship the right inference optimization for a Transformers workload.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # click's own help layout: option names are never cut, at any terminal width
)
models_app = typer.Typer(
    help="Models that need no model hub: prepare and list them.", no_args_is_help=True, rich_markup_mode=None
)
app.add_typer(models_app, name="models")
engines_app = typer.Typer(
    help="Serving engines (vLLM, SGLang) in environments infertune manages: install and list them.",
    no_args_is_help=True,
)
app.add_typer(engines_app, name="engines")


def _version(value: bool) -> None:
    if value:
        from infertune import __version__  # lazily: reading the installed version takes 40 ms
        from infertune.cli.output import out

        out.print(f"infertune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = None,
) -> None:
    pass


ModelOpt = Annotated[
    str | None, typer.Option("--model", help="'demo', a local model folder, or a hub id in the local HF cache")
]
TrustOpt = Annotated[bool, typer.Option("--trust-remote-code", help="allow the model's own code to run")]
CbBlockSizeOpt = Annotated[int | None, typer.Option(help="continuous batching: tokens per KV-cache block")]
CbNumBlocksOpt = Annotated[
    int | None, typer.Option(help="continuous batching: KV-cache blocks (default: sized from free memory)")
]
# workload flags shared by measure and tune
MaxNewTokensOpt = Annotated[int | None, typer.Option(help="tokens to generate per request")]
InputLenOpt = Annotated[
    str | None,
    typer.Option(
        help="pad each prompt to exactly N input tokens (512, 2k); a list mixes lengths across requests: 128,2k"
    ),
]
BatchOpt = Annotated[int | None, typer.Option(help="prompts per generate call")]
RepeatsOpt = Annotated[int | None, typer.Option(help="timed passes over the prompts")]
WarmupOpt = Annotated[int | None, typer.Option(help="untimed generate calls first")]
FormatOpt = Annotated[Format, typer.Option("--format", help="table for people, json for programs")]


def main() -> None:
    """Run the typer app; exit codes and error lines: `infertune.cli.exits`."""
    guard(lambda: app(standalone_mode=False))

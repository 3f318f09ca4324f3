"""The typer app, the options several verbs share, and `main`: exit codes and the one-line errors.

Exit codes: 0 the command did its job (a trial that ended in oom/error/timeout is still a result),
2 bad input (one line on stderr), 1 an internal error (one line; INFERTUNE_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from infertune import __version__
from infertune.cli.output import err, out
from infertune.errors import UserError

app = typer.Typer(
    help="Pick, prove and ship the right inference optimization for a Transformers workload.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,  # click's own help layout: option names are never cut, at any terminal width
)
models_app = typer.Typer(help="Models that need no model hub: prepare and list them.", no_args_is_help=True,
                         rich_markup_mode=None)
app.add_typer(models_app, name="models")
engines_app = typer.Typer(help="Serving engines (vLLM, SGLang) in environments infertune manages: install and list "
                               "them.", no_args_is_help=True)
app.add_typer(engines_app, name="engines")


def _version(value: bool) -> None:
    if value:
        out.print(f"infertune {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Show the version.")
    ] = None,
) -> None:
    pass


ModelOpt = Annotated[
    Optional[str], typer.Option("--model", help="'demo', a local model folder, or a hub id in the local HF cache")
]
TrustOpt = Annotated[bool, typer.Option("--trust-remote-code", help="allow the model's own code to run")]
CbBlockSizeOpt = Annotated[Optional[int], typer.Option(help="continuous batching: tokens per KV-cache block")]
CbNumBlocksOpt = Annotated[Optional[int], typer.Option(help="continuous batching: KV-cache blocks (default: "
                                                       "sized from free memory)")]
# workload flags shared by measure and tune
MaxNewTokensOpt = Annotated[Optional[int], typer.Option(help="tokens to generate per request")]
InputLenOpt = Annotated[Optional[str], typer.Option(
    help="pad each prompt to exactly N input tokens (512, 2k); a list mixes lengths across requests: 128,2k")]
BatchOpt = Annotated[Optional[int], typer.Option(help="prompts per generate call")]
RepeatsOpt = Annotated[Optional[int], typer.Option(help="timed passes over the prompts")]
WarmupOpt = Annotated[Optional[int], typer.Option(help="untimed generate calls first")]


def _is_usage_error(e: Exception) -> bool:
    # click's exceptions (vendored inside newer typer, plain click in older): duck-typed on purpose.
    return hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except UserError as e:
        err.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except (KeyboardInterrupt, typer.Abort):
        err.print("interrupted")
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - a bug: one line, traceback on request
        if _is_usage_error(e):
            if type(e).__name__ == "NoArgsIsHelpError":
                e.show()  # type: ignore[attr-defined]
            else:  # a bad flag or value: one line, not a usage box
                err.print(f"error: {e.format_message()}", markup=False, highlight=False,  # type: ignore[attr-defined]
                          soft_wrap=True)
            sys.exit(e.exit_code)  # type: ignore[attr-defined]
        if os.environ.get("INFERTUNE_DEBUG"):
            raise
        err.print(f"internal error: {type(e).__name__}: {e} (set INFERTUNE_DEBUG=1 for the traceback)",
                  markup=False, highlight=False, soft_wrap=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)

"""How every command ends: its exit code, and one line on stderr when it failed.

0 the command did its job (a trial that ended in oom/error/timeout is still a result), 2 bad input (one
line on stderr), 130 interrupted, 1 an internal error (one line; INFERTUNE_DEBUG=1 shows the traceback).
Typer is not imported here: the verbs that skip it (`infertune.cli.quick`) end the same way.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn, Protocol, TypeGuard

from infertune.core.errors import UserError


class _UsageError(Protocol):
    """What a click exception offers (click vendored inside newer typer, plain click in older)."""

    exit_code: int

    def format_message(self) -> str: ...

    def show(self) -> None: ...


def _is_usage_error(e: Exception) -> TypeGuard[_UsageError]:
    # duck-typed on purpose: the exception classes live in whichever click this typer carries
    return hasattr(e, "format_message") and isinstance(getattr(e, "exit_code", None), int)


def _aborted(e: Exception) -> bool:
    typer = sys.modules.get("typer")
    return typer is not None and isinstance(e, typer.Abort)


def guard(run: Callable[[], object]) -> NoReturn:
    """Run the command and exit with its code; errors as one line each."""
    try:
        code = run()
    except UserError as e:
        from infertune.cli.output import err

        err.print(f"error: {e}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        from infertune.cli.output import err

        err.print("interrupted")
        sys.exit(130)
    except Exception as e:
        from infertune.cli.output import err

        if _aborted(e):
            err.print("interrupted")
            sys.exit(130)
        if _is_usage_error(e):
            if type(e).__name__ == "NoArgsIsHelpError":
                e.show()
            else:  # a bad flag or value: one line, not a usage box
                err.print(f"error: {e.format_message()}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(e.exit_code)
        if os.environ.get("INFERTUNE_DEBUG"):
            raise
        err.print(
            f"internal error: {type(e).__name__}: {e} (set INFERTUNE_DEBUG=1 for the traceback)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)

"""The `infertune` command: a thin typer app over the API (parse the flags, call `infertune.api`, print).

One module per verb family; everything printed is rendered in `output`; `app` holds the typer app and the
shared options, `exits` the exit codes and error lines, `quick` the verbs that answer from caches and their
way in without typer (so this package imports nothing itself). `main` registers only the commands of the
verb being run, so only that verb family's module is imported (start-up: benchmarks/estimate_startup.py);
`register()` adds them all.
"""

import importlib
import sys

# (sub-app, command, module, function) in the order `infertune --help` lists them
COMMANDS = (
    ("", "env", "machine", "env"),
    ("models", "prepare", "machine", "models_prepare"),
    ("models", "list", "machine", "models_list"),
    ("", "profile", "machine", "profile"),
    ("", "measure", "measure", "measure"),
    ("", "estimate", "plan", "estimate"),
    ("", "advise", "plan", "advise"),
    ("", "tune", "tune", "tune"),
    ("", "demo", "tune", "demo"),
    ("", "sweep", "sweep", "sweep"),
    ("", "loadtest", "serving", "loadtest"),
    ("", "doctor", "doctor", "doctor"),
    ("", "report", "tune", "report"),
    ("", "mcp", "serving", "mcp"),
    ("", "serve-trial", "serving", "serve_trial"),
    ("engines", "install", "serving", "engines_install"),
    ("engines", "list", "serving", "engines_list"),
)
VERBS = {group or name for group, name, _module, _func in COMMANDS}
_registered: set[tuple[str, str]] = set()


def register(verb: str | None = None) -> None:
    """Add the commands to the typer app: all of them, or only those of `verb` (a command or a sub-app)."""
    from infertune.cli.app import app, engines_app, models_app

    apps = {"": app, "models": models_app, "engines": engines_app}
    for group, name, module, func in COMMANDS:
        if (verb is None or verb == (group or name)) and (group, name) not in _registered:
            fn = getattr(importlib.import_module(f"infertune.cli.{module}"), func)
            apps[group].command(None if name == func else name)(fn)
            _registered.add((group, name))


def main() -> None:
    verb = sys.argv[1] if len(sys.argv) > 1 else None
    register(verb if verb in VERBS else None)  # anything else (--help, a typo): all, for the listing
    from infertune.cli.app import main as run_app

    run_app()


__all__ = ["COMMANDS", "main", "register"]

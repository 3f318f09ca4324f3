"""`infertune doctor`: the classic inference mistakes in a user's own scripts, found statically (never executed).

This package stays on the standard library (no torch, transformers or pydantic): `doctor` answers in tens of
milliseconds, like a linter. The environment's checks (`doctor.env`) and `--advise` live above, in the api.
Importing the package loads nothing: its names are read from their modules when first asked for (the checker
in `doctor.checker`, the rules in `doctor.rules`), so the command line's findings cache (`doctor.cache`) answers
an unchanged file without loading a rule.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time; mypy reads this name as typing's
if TYPE_CHECKING:
    from infertune.doctor.checker import Report, check, generation_defaults, parse, python_files, settings
    from infertune.doctor.nodes import Finding, Target
    from infertune.doctor.result import DoctorResult
    from infertune.doctor.rules import RULES, Rule, select_rules

WHERE = {
    "Report": "checker",
    "check": "checker",
    "generation_defaults": "checker",
    "parse": "checker",
    "python_files": "checker",
    "settings": "checker",
    "SKIP_DIRS": "files",
    "Finding": "nodes",
    "Target": "nodes",
    "DoctorResult": "result",  # pydantic, for the API and the schema
    "RULES": "rules",
    "Rule": "rules",
    "select_rules": "rules",
}


def __getattr__(name: str) -> object:
    if name in WHERE:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "RULES",
    "DoctorResult",
    "Finding",
    "Report",
    "Rule",
    "Target",
    "check",
    "generation_defaults",
    "parse",
    "python_files",
    "select_rules",
    "settings",
]

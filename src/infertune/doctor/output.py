"""Doctor's outputs without third-party imports: text like ruff, JSON (the API's shape) and SARIF 2.1.0 for
code scanning (GitHub, GitLab, IDEs)."""

from __future__ import annotations

TYPE_CHECKING = False  # typing stays unimported on the fast path; mypy reads this name as typing's
if TYPE_CHECKING:
    from typing import Any

    from infertune.doctor.cache import Row
    from infertune.doctor.nodes import Finding
    from infertune.doctor.result import Finding as Shown  # the API's pydantic copy

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/infertune/infertune"


def text(findings: list[Finding] | list[Row], color: bool = False) -> str:
    bold, dim, reset = ("\033[1m", "\033[2m", "\033[0m") if color else ("", "", "")
    return "".join(
        f"{f.path}:{f.line}:{f.col} {bold}{f.rule}{reset} {f.message}\n{dim}    fix: {f.fix}{reset}\n" for f in findings
    )


def summary(n_findings: int, files: int | None, env: bool = False) -> str:
    scope = " and ".join(
        ([f"{files} file{'s' * (files != 1)}"] if files is not None else []) + (["the environment"] if env else [])
    )
    return f"{n_findings} finding{'s' * (n_findings != 1)} in {scope}" if n_findings else f"no findings in {scope}"


def as_json(findings: list[Finding] | list[Row], files: int, errors: list[str]) -> str:
    import json

    from infertune.core.schema import SCHEMA_VERSION

    return json.dumps(
        {
            "kind": "doctor",
            "schema_version": SCHEMA_VERSION,
            "findings": [f.model_dump() for f in findings],
            "files": files,
            "errors": errors,
            "advice": None,
        },
        indent=2,
    )


SRCROOT = "%SRCROOT%"  # relative URIs resolve against this base, declared in the run's originalUriBaseIds


def _location(path: str) -> dict[str, str]:
    """A file under the working folder: a relative URI on %SRCROOT%; elsewhere an absolute file:// URI."""
    from pathlib import Path

    p = Path(path).resolve()
    try:
        return {"uri": p.relative_to(Path.cwd().resolve()).as_posix(), "uriBaseId": SRCROOT}
    except ValueError:
        return {"uri": p.as_uri()}


def sarif(findings: list[Finding] | list[Shown], errors: list[str], version: str | None = None) -> dict:
    """One SARIF 2.1.0 log: every rule in the driver, each finding a result with its location."""
    from pathlib import Path

    from infertune.doctor.rules import RULES

    index = {r.id: i for i, r in enumerate(RULES)}
    rules = [
        {
            "id": r.id,
            "name": r.name,
            "shortDescription": {"text": r.summary},
            "fullDescription": {"text": r.summary},
            "help": {"text": f"fix: {r.fix}"},
            "helpUri": r.doc_url,
            "defaultConfiguration": {"level": "warning"},
        }
        for r in RULES
    ]
    results = []
    for f in findings:
        result: dict[str, Any] = {
            "ruleId": f.rule,
            "level": "warning",
            "message": {"text": f"{f.message} (fix: {f.fix})"},
        }
        if f.rule in index:
            result["ruleIndex"] = index[f.rule]
        if f.line > 0:
            result["locations"] = [
                {
                    "physicalLocation": {
                        "artifactLocation": _location(f.path),
                        "region": {"startLine": f.line, "startColumn": f.col},
                    }
                }
            ]
        results.append(result)
    driver = {"name": "infertune", "informationUri": INFO_URI, "rules": rules} | (
        {"version": version} if version else {}
    )
    run = {
        "tool": {"driver": driver},
        "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().resolve().as_uri() + "/"}},
        "results": results,
        "invocations": [
            {
                "executionSuccessful": not errors,
                "toolExecutionNotifications": [{"level": "error", "message": {"text": e}} for e in errors],
            }
        ],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def rule_table() -> str:
    from infertune.doctor.rules import RULES

    off = " (off by default: --select {})"
    return "".join(f"{r.id} {r.name}: {r.summary}{'' if r.default else off.format(r.id)}\n" for r in RULES)


__all__ = ["as_json", "rule_table", "sarif", "summary", "text"]

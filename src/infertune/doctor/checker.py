"""The doctor's checker: every rule over every file (read through `infertune.doctor`, which loads this module
when one of its names is first asked for)."""

from __future__ import annotations

import os

from infertune.doctor import checkpoint
from infertune.doctor import syntax as ast
from infertune.doctor.checkpoint import chat_template, folders, note
from infertune.doctor.files import python_files as files_to_check
from infertune.doctor.nodes import Finding, Record, Target, const, dotted, kw
from infertune.doctor.rules import RULES, SUPPRESS, Rule, select_rules
from infertune.doctor.rules.generation import SAMPLING
from infertune.doctor.script import Script
from infertune.doctor.version import parse_version, pinned, target_for

TYPE_CHECKING = False  # typing stays unimported on the fast path; mypy reads this name as typing's
if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path


def suppressed(s: Script, line: int, rule: Rule) -> bool:
    """`# infertune: ignore[IT001]` (id or name, comma-separated) on the line; a bare `ignore` silences all."""
    if not 1 <= line <= len(s.lines):
        return False
    m = SUPPRESS.search(s.lines[line - 1])
    if not m:
        return False
    if m.group(1) is None:
        return True
    keys = {k.strip().lower() for k in m.group(1).split(",")}
    return rule.id.lower() in keys or rule.name in keys


def _span(s: Script, node: ast.AST) -> tuple[int, int]:
    """The lines a suppression comment may sit on: the simple statement holding the node (a multi-line call)."""
    line = getattr(node, "lineno", 1)
    stmt = s.statement(node)
    if isinstance(stmt, ast.stmt) and not hasattr(stmt, "body"):  # a simple statement, not a def, loop, with...
        return min(stmt.lineno, line), max(stmt.end_lineno or line, line)
    return line, getattr(node, "end_lineno", line) or line


def check_script(s: Script, rules: list[Rule] | None = None, failed: list[str] | None = None) -> list[Finding]:
    """The findings of these rules on one script; a rule that fails (a bug of ours) is skipped for this file
    and said in `failed`, the others still run."""
    out, seen = [], set()
    for rule in RULES if rules is None else rules:
        try:
            found = list(rule.check(s))
        except (RecursionError, Exception) as e:
            if failed is not None:
                failed.append(f"{s.path}: rule {rule.id} failed ({type(e).__name__}: {e}); please report it")
            continue
        for node, message in found:
            line, col = getattr(node, "lineno", 1), getattr(node, "col_offset", 0) + 1
            first, last = _span(s, node)
            if (line, col, rule.id) in seen or any(suppressed(s, n, rule) for n in range(first, last + 1)):
                continue
            seen.add((line, col, rule.id))
            out.append(Finding(path=s.path, line=line, col=col, rule=rule.id, message=message, fix=rule.fix))
    return sorted(out, key=lambda f: (f.line, f.col, f.rule))


class Report(Record):
    _fields = ("findings", "files", "errors")

    def __init__(self, findings: list[Finding] | None = None, files: int = 0, errors: list[str] | None = None) -> None:
        self.findings = findings or []
        self.files = files  # Python files read
        self.errors = errors or []  # inputs that could not be read or parsed


def python_files(paths: Sequence[str | os.PathLike[str]]) -> tuple[list[Path], list[str]]:
    """Files to check (folders walked for *.py, tool and hidden folders skipped) and missing inputs, as the API
    names them (pathlib.Path); the check itself reads names as strings."""
    from pathlib import Path

    files, missing = files_to_check([os.fspath(p) for p in paths])
    return [Path(f) for f in files], [f"{p}: no such file or directory" for p in missing]


def parse(path: str | os.PathLike[str], target: Target | None = None) -> Script:
    """Raises ValueError with a one-line reason (unreadable, not UTF-8, syntax error)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a BOM (Windows editors) is not code
            source = fh.read()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a UTF-8 text file") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        tree = ast.parse(source, filename=str(path))
        # what only the compiler refuses (`return` or `await` outside a function, `break` outside a loop, ...):
        # Python will not run the file either (a fifth of a millisecond for a 100-line script)
        compile(tree, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise ValueError(f"{path}:{e.lineno or 0}:{e.offset or 0}: syntax error: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise ValueError(f"{path}: cannot parse: {e}") from None
    return Script(tree=tree, path=str(path), source=source, target=target or Target())


def check(
    paths: Sequence[str | os.PathLike[str]],
    target: Target | None = None,
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    target_version: str | None = None,
    deps: dict[str, list[tuple[str, str]]] | None = None,
) -> Report:
    """Every rule (or those selected) over every file. Raises ValueError (one line) on an unknown rule, a bad
    --target-version, or any bad input (a missing path, a file that is not UTF-8 or not Python, a folder with no
    Python file): every file is read and parsed before any rule runs, so bad input refuses the whole run.
    `deps` (the findings cache's): filled with the paths each script's check looked at, by script path."""
    rules = select_rules(select, ignore)
    pinned.cache_clear()  # one look per folder and run: pins may change between runs in one process
    chat_template.cache_clear()  # (and checkpoints may arrive in the cache)
    if target_version and parse_version(target_version.lstrip("<>=!~^ ")) is None:
        raise ValueError(f"--target-version: not a version: {target_version!r} (e.g. 4.46, 5, '>=4.40,<5')")
    files, missing = files_to_check([os.fspath(p) for p in paths])
    errors = [f"{p}: no such file or directory" for p in missing]
    if errors:
        raise ValueError(errors[0] + (f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""))
    if paths and not files:  # no paths at all: `--env` alone, nothing to read
        raise ValueError(f"{' '.join(str(p) for p in paths)}: no Python files to check (doctor reads *.py files)")
    scripts = [(f, parse(f)) for f in files]
    report = Report(files=len(scripts))
    for f, script in scripts:
        if deps is not None:  # one script's looks, from a clean slate: nothing remembered from the one before
            pinned.cache_clear()
            chat_template.cache_clear()
            checkpoint.seen = set()
        script.target = target_for(f, target or Target(), target_version)
        model = settings(script).get("model")
        script.generation_defaults = generation_defaults(model if isinstance(model, str) else None)
        report.findings += check_script(script, rules, report.errors)
        if deps is not None and checkpoint.seen is not None:
            deps[script.path] = sorted(checkpoint.seen)
            checkpoint.seen = None
    return report


def generation_defaults(model: str | None) -> dict | None:
    """The sampling and length fields of a model's generation_config.json when the model is here (a folder, or
    the HF cache); None when it is not (never downloads)."""
    if not model:
        return None
    for f in (os.path.join(folder, "generation_config.json") for folder in folders(model)):
        note(f)
        try:
            with open(f, encoding="utf-8") as fh:
                text = fh.read()
            import json  # only when a checkpoint is here: json stays off the fast path

            data = json.loads(text)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if k in (*SAMPLING, "do_sample", "max_length", "max_new_tokens")}
    return None


# --- a script's settings, for `--advise` ------------------------------------------------------------------

QUANT_FROM_BNB = {"load_in_4bit": "bnb-4bit", "load_in_8bit": "bnb-8bit"}


def settings(script: Script) -> dict[str, object]:
    """What the script loads and how, as `infertune advise` options (only what is written as literals)."""
    out: dict[str, object] = {}
    for c in script.loads:
        mid = script.model_id(c)
        if mid:
            out.setdefault("model", mid)
        dt = const(kw(c, "dtype") or kw(c, "torch_dtype"))
        if isinstance(dt, str):
            out.setdefault("dtype", {"float": "float32", "half": "float16"}.get(dt, dt))
        attn = const(kw(c, "attn_implementation"))
        if isinstance(attn, str):
            out.setdefault("attn", attn)
        placement = const(kw(c, "device_map"))
        if isinstance(placement, str):  # the current placement, as advise --device-map reads it
            out.setdefault("device_map", placement)
    for c in script.calls_named("BitsAndBytesConfig"):
        for key, q in QUANT_FROM_BNB.items():
            if const(kw(c, key)) is True:
                out.setdefault("quantization", q)
    for c in script.generates:
        n = const(kw(c, "max_new_tokens"))
        if isinstance(n, int) and not isinstance(n, bool):
            out.setdefault("max_new_tokens", str(n))
        cache = const(kw(c, "cache_implementation"))
        if isinstance(cache, str):
            out.setdefault("kv_cache", cache)
    if any(dotted(c.func) == "torch.compile" for c in script.calls) or out.get("kv_cache") == "static":
        out["compile"] = True
    return out


__all__ = ["RULES", "Finding", "Report", "Rule", "Target", "check", "parse", "python_files", "settings"]

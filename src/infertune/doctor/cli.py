"""`infertune doctor` on the fast path: the standard library only, so a check answers in tens of milliseconds (a
pre-commit hook, an editor on save). The common command lines (paths, --format, --select, --ignore,
--target-version, --list-rules, --no-cache) are read without argparse, whose import, messages catalogue and help
formatter cost more than the check of one file; anything else (--help, an unknown or misspelt option, a bad
--format) goes through argparse, which answers or refuses. Options that need the higher layers (--env, --advise,
--gpu, --model) return None: the caller hands over to the full CLI. Text and JSON answers for unchanged files come
from the findings cache (`doctor.cache`) without loading the rules."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # (typing is not imported at run time: mypy reads this name as typing's)
if TYPE_CHECKING:
    import argparse

FORMATS = ("text", "json", "sarif")


class Args:
    """What the command line asks for (argparse's Namespace, or the quick reading's)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.fmt = "text"
        self.select: list[str] = []
        self.ignore: list[str] = []
        self.target_version: str | None = None
        self.env = self.advise = self.list_rules = self.no_cache = False
        self.gpu: str | None = None
        self.model: str | None = None


VALUED = {"--format": "fmt", "--select": "select", "--ignore": "ignore", "--target-version": "target_version"}


def quick_args(argv: list[str]) -> Args | None:
    """The plain command lines read by hand; None for anything argparse must judge (help, errors, --env...)."""
    out, i = Args(), 0
    while i < len(argv):
        a = argv[i]
        name, eq, value = a.partition("=")
        if a == "--list-rules":
            out.list_rules = True
        elif a == "--no-cache":
            out.no_cache = True
        elif name in VALUED:
            if not eq:
                if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                    return None
                i, value = i + 1, argv[i + 1]
            if name in ("--select", "--ignore"):
                getattr(out, VALUED[name]).append(value)
            else:
                setattr(out, VALUED[name], value)
        elif a.startswith("-") and a != "-":
            return None
        else:
            out.paths.append(a)
        i += 1
    return out if out.fmt in FORMATS else None


def parser() -> argparse.ArgumentParser:
    import argparse  # here: the quick reading does without it

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str):  # one clear line, exit 2 (the project's rule for bad input)
            sys.stderr.write(f"error: {message}\n")
            raise SystemExit(2)

    p = _Parser(
        prog="infertune doctor",
        description="Find the classic inference mistakes in your scripts, "
        "statically (never runs them). Exit 1 on findings, 2 on bad input (nothing is checked then).",
    )
    p.add_argument("paths", nargs="*", help="Python files or folders to check")
    p.add_argument("--format", dest="fmt", choices=FORMATS, default="text", help="text, json or sarif")
    p.add_argument(
        "--select", action="append", default=[], help="only these rules (ids, names, prefixes; comma-separated)"
    )
    p.add_argument("--ignore", action="append", default=[], help="skip these rules (ids, names, prefixes)")
    p.add_argument(
        "--target-version",
        help="the transformers version the scripts run on (4.46, 5, '>=4.40,<5'); "
        "default: the pins beside or above each script, else both 4.x and 5.x",
    )
    p.add_argument("--env", action="store_true", help="also check this environment (full CLI)")
    p.add_argument("--advise", action="store_true", help="then advise on each script's settings (full CLI)")
    p.add_argument("--gpu", help="the GPU the scripts target (full CLI)")
    p.add_argument("--model", help="with --env: this model's weights against free memory (full CLI)")
    p.add_argument("--list-rules", action="store_true", help="print the rules and exit")
    p.add_argument("--no-cache", action="store_true", help="check every file again (no findings cache)")
    return p


def split(values: list[str]) -> list[str]:
    return [v.strip() for x in values for v in x.split(",") if v.strip()]


def main(argv: list[str]) -> int | None:
    args = quick_args(argv) or parser().parse_args(argv)
    if args.env or args.advise or args.gpu or args.model:
        return None
    if args.list_rules:
        from infertune.doctor import output

        sys.stdout.write(output.rule_table())
        return 0
    if not args.paths:
        sys.stderr.write("error: give Python files or folders to check (infertune doctor app.py), or --env\n")
        return 2
    select, ignore = split(args.select), split(args.ignore)
    asked = (tuple(select), tuple(ignore), args.target_version)
    deps: dict[str, list[tuple[str, str]]] | None = None
    before: dict[str, bytes | None] | None = None
    if args.fmt != "sarif":
        from infertune.doctor import cache

        if cache.enabled(args.no_cache):
            hit = cache.lookup(args.paths, asked)
            if hit is not None:
                return answer(args.fmt, *hit, [])
            deps, before = {}, cache.digests(args.paths)
    from infertune import doctor

    try:
        report = doctor.check(args.paths, select=select, ignore=ignore, target_version=args.target_version, deps=deps)
    except ValueError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    if deps is not None and before is not None and not report.errors:
        cache.store(asked, before, report.findings, deps)
    if args.fmt == "sarif":
        import json

        from infertune.doctor import output
        from infertune.probe.versions import own_version  # lazily: only SARIF names the tool's version

        sarif = output.sarif(report.findings, report.errors, own_version())
        sys.stdout.write(json.dumps(sarif, indent=2) + "\n")
        return 2 if report.errors else 1 if report.findings else 0
    return answer(args.fmt, report.findings, report.files, report.errors)


def answer(fmt: str, findings: list, files: int, errors: list[str]) -> int:
    """Print the findings as text or JSON (from a check or from the cache); the exit code."""
    from infertune.doctor import output

    if fmt == "json":
        sys.stdout.write(output.as_json(findings, files, errors) + "\n")
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        sys.stdout.write(output.text(findings, color))
        for err in errors:
            sys.stderr.write(f"error: {err}\n")
        sys.stderr.write(output.summary(len(findings), files) + "\n")
    return 2 if errors else 1 if findings else 0

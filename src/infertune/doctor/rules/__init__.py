"""The rules: each a function over one parsed script that yields (node, message). `RULES` (rules/catalog.py) lists
them with their id, name, fix and documentation link; families live in loading, generation, outputs, prompts and
serving. The why of each is in docs/doctor.md."""

from __future__ import annotations

from infertune.doctor.nodes import IGNORECASE, lazy_compile
from infertune.doctor.rules.catalog import RULES
from infertune.doctor.rules.rule import Rule

BY_KEY = {**{r.id.lower(): r for r in RULES}, **{r.name: r for r in RULES}}
SUPPRESS = lazy_compile(r"#\s*infertune:\s*ignore(?:\[([^\]]*)\])?", IGNORECASE)


def select_rules(select: list[str] | None = None, ignore: list[str] | None = None) -> list[Rule]:
    """Rules chosen like ruff's --select/--ignore: ids, names or id prefixes (IT0, IT01); without --select the
    rules on by default (IT010 and IT011 only when selected, by id, prefix or ALL). Raises ValueError."""

    def match(keys: list[str]) -> set[str]:
        out: set[str] = set()
        for k in (x.strip() for x in keys):
            if not k:
                continue
            hit = {r.id for r in RULES if r.id.lower().startswith(k.lower()) or r.name == k.lower() or k == "ALL"}
            if not hit:
                raise ValueError(f"unknown rule {k!r} (ids IT001..{RULES[-1].id}, names, or prefixes like IT01)")
            out |= hit
        return out

    chosen = match(select) if select else {r.id for r in RULES if r.default}
    chosen -= match(ignore or [])
    return [r for r in RULES if r.id in chosen]


__all__ = ["BY_KEY", "RULES", "SUPPRESS", "Rule", "select_rules"]

"""A rule of the doctor: its id, name, summary, fix, check (a function over one parsed script that yields (node,
message)) and whether it is on by default; `doc_url` links its section of docs/doctor.md."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import Record
from infertune.doctor.script import Script

TYPE_CHECKING = False  # (collections.abc costs a check ~2 ms of start-up; type checkers read this as True)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

DOCS = "https://github.com/infertune/infertune/blob/main/docs/doctor.md"


class Rule(Record):
    _fields = ("id", "name", "summary", "fix", "check", "default")

    def __init__(
        self,
        id: str,
        name: str,
        summary: str,
        fix: str,
        check: Callable[[Script], Iterator[tuple[ast.AST, str]]],
        # off unless selected (--select): advisory rules wrong more often than right on real scripts (docs/doctor.md)
        default: bool = True,
    ) -> None:
        self.id, self.name, self.summary, self.fix, self.check, self.default = id, name, summary, fix, check, default

    def __hash__(self) -> int:  # one rule per id
        return hash(self.id)

    @property
    def doc_url(self) -> str:
        return f"{DOCS}#{self.id.lower()}-{self.name}"

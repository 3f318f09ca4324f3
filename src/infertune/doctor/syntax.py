"""The part of Python's `ast` module the doctor uses, without importing `ast` itself.

`import ast` pulls in enum, contextlib, collections, functools and operator for its unparser: about 7 ms, a sixth
of a whole `infertune doctor` start-up. The node classes and the parser live in the `_ast` extension, and the
walk is a few lines, so the doctor imports this module as `ast` (`from infertune.doctor import syntax as ast`)
and the real one only when a rule first needs `unparse` (15 of the 334 corpus scripts). Behaviour is
`ast`'s own: `walk` visits breadth-first in the same order, `parse` compiles with the same flag.
"""

from __future__ import annotations

from _ast import *  # noqa: F403  (every node class, as `ast` re-exports them)
from _ast import AST, PyCF_ONLY_AST
from _collections import deque

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import TypeVar

    _T = TypeVar("_T", bound=AST)


def parse(source: str | bytes, filename: str = "<unknown>") -> Module:  # noqa: F405
    """`ast.parse(source, filename)`: the module's tree (SyntaxError as `ast.parse` raises it)."""
    return compile(source, filename, "exec", PyCF_ONLY_AST)  # type: ignore[return-value]


def iter_child_nodes(node: AST) -> Iterator[AST]:
    for name in node._fields:
        field = getattr(node, name, None)
        if isinstance(field, AST):
            yield field
        elif isinstance(field, list):
            for item in field:
                if isinstance(item, AST):
                    yield item


def walk(node: AST) -> Iterator[AST]:
    """Every node under `node` (itself first), breadth-first, as `ast.walk`."""
    todo = deque([node])
    while todo:
        node = todo.popleft()
        todo.extend(iter_child_nodes(node))
        yield node


def copy_location(new_node: _T, old_node: AST) -> _T:
    for attr in "lineno", "col_offset", "end_lineno", "end_col_offset":
        if attr in old_node._attributes and attr in new_node._attributes:
            value = getattr(old_node, attr, None)
            if value is not None or (hasattr(old_node, attr) and attr.startswith("end_")):
                setattr(new_node, attr, value)
    return new_node


def unparse(node: AST) -> str:
    """`ast.unparse`: the one call that loads the real module."""
    import ast

    return ast.unparse(node)

"""The literal values a parsed file's names hold: a number, the texts a string is built from, a model id. A base
of `Flow`, whose `origins` these read (standard library only)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import const, dotted, method, receiver


class Literals:
    def origins(self, node, depth: int = 0) -> list:
        """Where a value comes from: `Flow`'s."""
        raise NotImplementedError

    def number(self, node: ast.expr | None) -> object:
        """A literal's value, or the one literal a name is bound to (`max_length = 256` ... `max_length=max_length`)."""
        if (value := const(node)) is not None or not isinstance(node, ast.Name):
            return value
        values = {const(o) for o in self.origins(node)} or {None}
        return values.pop() if len(values) == 1 else None

    def id_strings(self, node) -> list[str]:
        """The texts a model id may be: each literal it may hold, and a concatenation (`"./" + name`, an f-string)
        whole, its pieces joined in order (doctor-real-12 d11: `"./" + "phi-4-28.3B-zero"`)."""
        origins = self.origins(node)
        if len(origins) == 1 and isinstance(origins[0], ast.BinOp | ast.JoinedStr):
            return ["".join(t for _, t in self.strings(node))]
        return [t for _, t in self.strings(node)]

    def strings(self, node, depth: int = 0) -> list[tuple[ast.AST, str]]:
        """The literal text a string value is built from (f-strings, `+`, `.format`, `join`, helpers)."""
        out: list[tuple[ast.AST, str]] = []
        for o in self.origins(node):
            if depth > 6:
                break
            if isinstance(o, ast.Constant) and isinstance(o.value, str):
                out.append((o, o.value))
            elif isinstance(o, ast.JoinedStr):
                text = "".join(str(v.value) for v in o.values if isinstance(v, ast.Constant))
                out.append((o, text))
                for v in o.values:
                    if isinstance(v, ast.FormattedValue):
                        out += self.strings(v.value, depth + 1)
            elif isinstance(o, (ast.List, ast.Tuple)):
                out += [x for e in o.elts for x in self.strings(e, depth + 1)]
            elif isinstance(o, (ast.ListComp, ast.GeneratorExp)):  # [build_prompt(q) for q in texts]: each item's
                out += self.strings(o.elt, depth + 1)
            elif isinstance(o, ast.BinOp):
                out += self.strings(o.left, depth + 1) + self.strings(o.right, depth + 1)
            elif isinstance(o, ast.Call) and method(o) == "join" and dotted(o.func) in ("os.path.join", "path.join"):
                out.append((o, "/".join(t for a in o.args for _, t in self.strings(a, depth + 1))))  # a path: one text
            elif isinstance(o, ast.Call) and method(o) in ("format", "strip", "join", "replace", "lstrip", "rstrip"):
                out += self.strings(receiver(o), depth + 1)  # never replace()'s arguments: they are removed
                if method(o) == "join":
                    out += [x for a in o.args[:1] for x in self.strings(a, depth + 1)]
                if method(o) == "format":  # what fills its fields is in the text too ("{b_inst}" with B_INST)
                    out += [x for a in [*o.args, *(k.value for k in o.keywords)] for x in self.strings(a, depth + 1)]
        return out

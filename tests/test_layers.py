"""The house (docs/architecture.md): one-way layers, no import circle, no source file over 400 lines."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).parents[1]
SRC = ROOT / "src"
MAX_LINES = 400
NOT_YET_SPLIT: set[str] = set()  # doctor/rules.py was split into doctor/rules/ (issue 20)


def lint_imports(src: Path) -> subprocess.CompletedProcess:
    """`lint-imports` with the contract in pyproject.toml, over the package under `src`."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def test_the_layers_contract_is_kept():
    r = lint_imports(SRC)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "5 kept, 0 broken" in r.stdout


def test_an_upward_import_breaks_the_contract(tmp_path):
    """The contract bites: the doctor (below the advisor) importing the advisor is refused, even lazily."""
    shutil.copytree(SRC / "infertune", tmp_path / "infertune", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "infertune" / "doctor" / "env.py", "a", encoding="utf-8") as f:
        f.write("\n\ndef _upward():\n    from infertune.advisor.advise import Advice\n\n    return Advice\n")
    r = lint_imports(tmp_path)
    assert r.returncode == 1
    assert "infertune.doctor is not allowed to import infertune.advisor" in r.stdout


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                scc = []
                while True:
                    m = stack.pop()
                    on.discard(m)
                    scc.append(m)
                    if m == node:
                        break
                if len(scc) > 1:
                    found.append(sorted(scc))
    return found


def test_no_import_circle():
    graph = grimp.build_graph("infertune", cache_dir=None)
    assert "infertune.api.checkup" in graph.modules and "infertune.cli.app" in graph.modules
    assert _cycles(graph) == []


def test_circle_finder_finds_a_circle():
    class Graph:
        modules = {"a", "b", "c", "d"}
        edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}

        def find_modules_directly_imported_by(self, m):
            return self.edges[m]

    assert _cycles(Graph()) == [["a", "b", "c"]]


def test_no_source_file_over_400_lines():
    long = {
        str(p.relative_to(SRC / "infertune")): n
        for p in (SRC / "infertune").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert set(long) <= NOT_YET_SPLIT, long


def test_no_merge_conflict_markers_are_left_in_the_repository():
    """A merge once left its markers in README.md; every text file the repository tracks is checked."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    if not files:  # not a git checkout (an sdist): the source and docs folders
        files = [
            str(p.relative_to(ROOT))
            for d in ("src", "docs", "tests", "benchmarks", "scripts")
            for p in (ROOT / d).rglob("*")
            if p.is_file()
        ]
    found = []
    for name in files:
        if not name.endswith((".py", ".md", ".toml", ".sh", ".json", ".cfg", ".txt", ".yml", ".yaml", ".csv")):
            continue
        try:
            text = (ROOT / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        found += [
            f"{name}:{n}" for n, line in enumerate(text.splitlines(), 1) if line.startswith(("<<<<<<< ", ">>>>>>> "))
        ]
    assert not found, f"merge conflict markers: {found}"

"""The benchmarks are not run by the suite (they take minutes to hours), but they must keep importing:
a refactor that moves what they use breaks them silently otherwise (it did, once)."""

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = sorted((Path(__file__).parent.parent / "benchmarks").glob("*.py"))


@pytest.mark.parametrize("path", BENCHMARKS, ids=[p.stem for p in BENCHMARKS])
def test_benchmark_imports_and_has_a_main(path):
    spec = importlib.util.spec_from_file_location(f"bench_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # module level only: main() runs under __name__ == "__main__"
    assert callable(module.main) and module.__doc__

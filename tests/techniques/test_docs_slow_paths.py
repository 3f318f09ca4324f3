"""docs/slow-paths.md is the text written from the data, and it lists every entry and feature with its sources."""

from pathlib import Path

from infertune.techniques import slow_paths, slow_paths_doc, versions

DOC = (Path(__file__).resolve().parents[2] / "docs" / "slow-paths.md").read_text()


def test_the_page_is_the_generated_text():
    assert DOC == slow_paths_doc.markdown(), "run: python -m infertune.techniques.slow_paths_doc > docs/slow-paths.md"


def test_the_page_lists_every_entry_with_its_sources():
    for p in slow_paths.ALL:
        assert f"`{p.id}`" in DOC, p.id
        assert all(src in DOC for src in p.sources), p.id


def test_the_page_lists_every_feature_with_its_version_and_source():
    for x in versions.FEATURES:
        row = next((line for line in DOC.splitlines() if line.startswith(f"| `{x.id}` |")), "")
        assert x.first in row and x.source in row, x.id

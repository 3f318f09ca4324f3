"""docs/slow-paths.md, written from the data (`python -m infertune.techniques.slow_paths_doc > docs/slow-paths.md`);
tests/techniques/test_docs_slow_paths.py checks that the page is this text."""

from __future__ import annotations

from infertune.techniques import slow_paths, versions

INTRO = """# Slow paths, known problems and feature versions

What the estimate has no term for, as data (`src/infertune/techniques/slow_paths.py`,
`src/infertune/techniques/versions.py`); this page is generated from them
(`python -m infertune.techniques.slow_paths_doc > docs/slow-paths.md`). The advisor matches the entries against
the current setup on the target (`slow_paths.matching`): an entry that holds folds its measured factor into the
expected speed (`advisor.moves.effective`); the moves that leave it are its cures, and they rank first where the
user saw the symptom (`--observed`). An entry that holds but for a library version nobody stated is named as a
candidate cause only where the observed speed is beyond the speed model's error (2x the expected, or the validated
band's top where wider: MoE decode) or an out-of-memory was observed, never priced; its upgrade otherwise ranks
after every other move. A `crash` entry that holds is a blocking finding of its own (an incompatibility, not a
resource limit), cured first.
"""

VERSIONS = """## Feature -> first version

Every compatibility check that needs one of these reads the target's version through this table: the stated one
(`--lib NAME=VERSION`) first, this host's only when the target is this host. Below the first version a drop-in
feature travels with the move as an upgrade (`upgrade` yes: the move's `packages` says `>=VERSION`); a new API
blocks the move. Structure rules read the version too: MoE experts that were per-expert `nn.Linear` layers
before transformers 5.0 are quantized by bitsandbytes and torchao there (`versions.experts_fused`).
"""


def factor(p: slow_paths.SlowPath) -> str:
    if p.ratio is None:
        return "-"
    if callable(p.ratio):
        return f"{p.phase}: computed per setup (see the entry)"
    return f"{p.phase} x{p.ratio:g} of {p.reference_name}"


def markdown() -> str:
    lines = [INTRO, "## Slow paths and known problems\n", "| id | symptoms | where | factor | cures | sources |"]
    lines.append("|---|---|---|---|---|---|")
    for p in slow_paths.ALL:
        cures = ", ".join(f"`{c}`" for c in p.cures)
        sources = ", ".join(f"<{s}>" for s in p.sources)
        lines.append(f"| `{p.id}` | {', '.join(p.symptoms)} | {p.where} | {factor(p)} | {cures} | {sources} |")
    lines += ["", "What each entry says:", ""] + [f"- `{p.id}`: {p.what}" for p in slow_paths.ALL]
    lines += ["", VERSIONS, "| feature | package | first | upgrade | what | source |", "|---|---|---|---|---|---|"]
    for x in versions.FEATURES:
        up = "yes" if x.upgrade else "no"
        lines.append(f"| `{x.id}` | {x.package} | {x.first} | {up} | {x.what} | <{x.source}> |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")

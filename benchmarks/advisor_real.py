"""How often `infertune advise` gets real user reports right: a corpus of public threads, each with the fix that worked.

Reads a corpus folder (cases.json + configs/), runs each case's `infertune advise ...` command in-process through the
same parser and `infertune.api.advise` the CLI uses (from the corpus folder, so `--model configs/<name>` resolves),
and judges the answer against the case's machine-checkable `right`:

- right:      diagnosis.bottleneck is in right.bottleneck AND next.technique is in right.next (null = no change);
- acceptable: the bottleneck is in the list but next is not (the diagnosis holds, the proposed step does not);
- wrong:      the bottleneck is not in the list (or the command failed: `error`).

Prints one line per case and the totals per part, the test part first, then dev (a corpus without a split is one
part, `all`). The corpus `../shared/corpora/advisor-real-1` has no `right` field: its judgement lives in
ADVISOR_REAL_1_RIGHT below, derived from each case's accepted fix and verdict reason.

    PYTHONPATH=src python benchmarks/advisor_real.py [--corpus DIR] [--part test|dev|all] [--verbose]

A case may also carry `checks` (all must hold for `right`; a failed one makes a right answer `acceptable`):
`next_settings` (a subset of next.settings), `next_not` (techniques next must not be), `text_present` / `text_absent` (in the advice's JSON, lower case),
`when_next` ({technique: {"packages": NAME}}: if next is that technique, its settings carry NAME's upgrade), and
`bin_shards` ({"count", "bytes"}: sparse `.bin` files beside the config, in a temporary copy). `next: "any"`
accepts every move. The pattern probes (benchmarks/corpora/advisor-patterns) use them.

About a second per case on a warm cache (the first sight of a config profiles it on the meta device).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = ROOT / "benchmarks" / "corpora" / "advisor-real-2"
ALL = ["load-memory", "kv-cache-growth", "long-input-attention", "concurrency", "decode-speed", "prefill-speed", "none"]

# advisor-real-1 (15 cases, verdicts in prose): the judgement as a machine-checkable list, from each case's
# accepted_fix and the reason given with its earlier verdict. None in "next" means: no change proposed.
ADVISOR_REAL_1_RIGHT: dict[str, dict[str, list[Any]]] = {
    # fp32 24 GB on a 24 GB card: half precision was the fix
    "C01-gptj-fp32-3090": {"bottleneck": ["load-memory"], "next": ["dtype"]},
    # fp16 7B fits 16 GB; the memory was held outside the process (a reboot fixed it): nothing to change
    "C02-vicuna7b-fp16-16GB-stale": {"bottleneck": ["none"], "next": [None]},
    # 70B fp16 on 2x A100 80GB, serving: the maintainer's GPTQ checkpoint, or the TGI sharding that ran
    "C03-llama2-70b-2xA100-serving": {
        "bottleneck": ["load-memory", "kv-cache-growth", "concurrency"],
        "next": ["quant-prequantized", "tensor-parallel"],
    },
    # 70B bf16 on one A100 80GB: a 4-bit checkpoint (GPTQ), or another 4-bit method of the same size
    "C04-llama3-70b-1xA100": {
        "bottleneck": ["load-memory"],
        "next": ["quant-prequantized", "quant-bnb-4bit", "quant-torchao"],
    },
    # 20B T5 on one of 4 V100 16 GB: shard it over the 4 GPUs
    "C05-flanul2-4xV100-unsharded": {"bottleneck": ["load-memory"], "next": ["tensor-parallel", "device-map"]},
    # eager attention at 20k tokens: a fused attention (FlashAttention was the maintainers' fix)
    "C06-llama7b-20k-eager-A100": {
        "bottleneck": ["long-input-attention"],
        "next": ["attn-sdpa", "attn-flash2", "attn-flex", "attn-kernels-hub"],
    },
    # memory growing with length from a GPT-Neo local-attention bug: upgrade transformers
    "C07-gptneo-maxlen-oom": {"bottleneck": ["kv-cache-growth", "long-input-attention"], "next": ["upgrade"]},
    # slow bnb 4-bit kernels of bitsandbytes < 0.40: upgrade (or a fast pre-quantized checkpoint)
    "C08-falcon7b-bnb4-3060": {"bottleneck": ["decode-speed"], "next": ["upgrade", "quant-prequantized"]},
    # bnb 8-bit over 4 T4 in TGI: GPTQ, 'as fast as not quantized'
    "C09-falcon40b-bnb8-4xT4": {"bottleneck": ["decode-speed"], "next": ["quant-prequantized"]},
    # 8-bit 5x slower than bf16 on an A100 40GB where bf16 fits: drop 8-bit (or 4-bit, faster now)
    "C10-llama7b-bnb8-A100-40GB": {"bottleneck": ["decode-speed"], "next": ["quant-none", "quant-bnb-4bit"]},
    # 8-bit 13B on a 48 GB card, fp16 fits: drop 8-bit
    "C11-vicuna13b-int8-A40": {"bottleneck": ["decode-speed"], "next": ["quant-none"]},
    # 8-bit 7B on a 16 GB card, fp16 (~14 GB) fits: drop 8-bit
    "C12-vicuna7b-int8-4080": {"bottleneck": ["decode-speed"], "next": ["quant-none"]},
    # batch-1 decode on a 4090: static cache + torch.compile, confirmed in the thread
    "C13-tinyllama-4090-static-compile": {"bottleneck": ["decode-speed"], "next": ["static-cache-compile"]},
    # fp16 on a CPU is emulated: bf16 or fp32
    "C14-qwen2-0.5b-cpu-fp16": {"bottleneck": ["decode-speed"], "next": ["dtype"]},
    # many concurrent users on a synchronous server: a continuous-batching server (TGI)
    "C15-bloom176b-concurrency": {"bottleneck": ["concurrency"], "next": ["serving-engine", "continuous-batching"]},
}


@contextmanager
def chdir(path: Path) -> Iterator[None]:
    """contextlib.chdir (Python 3.11) for the 3.10 the project supports."""
    here = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(here)


# advisor-real-1's commands predate --observed, --oom, --lib and a stated placement: what each thread stated that
# those flags say, added to its command (the judgement above is unchanged). C08 (the 6m55s its 4-bit run took) and
# C09's --tp 4 (TGI --num-shard 4 shards by tensor parallelism; it was --device-map auto before) were set on
# 2026-12-05 after the answers were seen (dev material).
ADVISOR_REAL_1_STATED: dict[str, str] = {
    "C02-vicuna7b-fp16-16GB-stale": "--lib transformers=4.33.1",
    "C07-gptneo-maxlen-oom": "--oom decode --lib transformers=4.6.0",
    "C08-falcon7b-bnb4-3060": "--observed e2e=415s",
    "C09-falcon40b-bnb8-4xT4": "--tp 4 --observed tpot=190ms",
    "C15-bloom176b-concurrency": "--device-map auto",
}


def load(corpus: Path) -> list[dict[str, Any]]:
    cases = json.loads((corpus / "cases.json").read_text(encoding="utf-8"))
    for c in cases:
        if "right" not in c:
            if c["id"] not in ADVISOR_REAL_1_RIGHT:
                raise SystemExit(f"{corpus}: case {c['id']} has no 'right' and no judgement in the runner")
            c["right"] = ADVISOR_REAL_1_RIGHT[c["id"]]
            if c["id"] in ADVISOR_REAL_1_STATED:
                c["command"] = c["command"].replace(" --no-input", f" {ADVISOR_REAL_1_STATED[c['id']]} --no-input", 1)
        c.setdefault("split", "all")
    return cases


def advise(command: str) -> Any:
    """The `Advice` of one `infertune advise ...` command line, run in-process."""
    from infertune import api
    from infertune.cli.quick import parse

    words = shlex.split(command)
    if words[:2] != ["infertune", "advise"]:
        raise ValueError(f"not an `infertune advise` command: {command!r}")
    flags = parse("advise", words[2:])
    if flags is None:
        raise ValueError(f"flags the quick parser does not read (typo or bad value): {command!r}")
    flags.pop("fmt", None)
    flags.pop("no_input", None)
    return api.advise(**flags)


def failed_checks(advice: Any, checks: dict[str, Any]) -> list[str]:
    """The case's `checks` that do not hold for this advice (see the module doc)."""
    out: list[str] = []
    nxt = advice.next
    settings = nxt.settings if nxt else {}
    for k, v in checks.get("next_settings", {}).items():
        if settings.get(k) != v:
            out.append(f"next.settings[{k}] != {v!r}")
    text = advice.model_dump_json().lower()
    out += [f"no {t!r} in the advice" for t in checks.get("text_present", []) if t.lower() not in text]
    out += [f"{t!r} in the advice" for t in checks.get("text_absent", []) if t.lower() in text]
    out += [f"next is {t!r}" for t in checks.get("next_not", []) if nxt and nxt.technique == t]
    want = checks.get("when_next", {}).get(nxt.technique if nxt else "")
    if want and want["packages"] not in (settings.get("packages") or {}):
        out.append(f"{nxt.technique} without the {want['packages']} upgrade it needs")
    return out


def judge(bottleneck: str | None, nxt: str | None, right: dict[str, Any], failed: list[str] | None = None) -> str:
    if bottleneck not in right["bottleneck"]:
        return "wrong"
    ok = right["next"] == "any" or nxt in right["next"]
    return "right" if ok and not failed else "acceptable"


@contextmanager
def case_folder(corpus: Path, case: dict[str, Any]) -> Iterator[Path]:
    """The corpus folder, or a temporary copy whose model folder holds the case's sparse `.bin` shards."""
    shards = case.get("bin_shards")
    if not shards:
        yield corpus
        return
    import re
    import shutil
    import tempfile

    model = re.search(r"--model (\S+)", case["command"])
    assert model, case["id"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / model.group(1)
        shutil.copytree(corpus / model.group(1), folder)
        for i in range(shards["count"]):
            with open(folder / f"pytorch_model-{i + 1:05d}-of-{shards['count']:05d}.bin", "wb") as fh:
                fh.truncate(shards["bytes"])  # sparse: its size, no disk
        yield Path(tmp)


def run(corpus: Path, part: str, verbose: bool = False) -> dict[str, Counter]:
    cases = load(corpus)
    parts = [p for p in ("test", "dev", "all") if any(c["split"] == p for c in cases)]
    if part != "all":
        parts = [p for p in parts if p == part]
    totals: dict[str, Counter] = {}
    print(f"corpus {corpus} ({len(cases)} cases)")
    for p in parts:
        chosen = [c for c in cases if c["split"] == p]
        print(f"\n[{p}] {len(chosen)} cases")
        print(f"{'id':44s} {'category':30s} {'bottleneck':22s} {'next':22s} verdict")
        count: Counter = Counter()
        for c in chosen:
            t0 = time.perf_counter()
            failed: list[str] = []
            try:
                with case_folder(corpus, c) as folder, chdir(folder):
                    a = advise(c["command"])
                bottleneck, nxt = a.diagnosis.bottleneck, a.next.technique if a.next else None
                failed = failed_checks(a, c.get("checks", {}))
                verdict = judge(bottleneck, nxt, c["right"], failed)
            except Exception as e:  # a command the advisor refuses is a finding, not a crash of the benchmark
                bottleneck, nxt, verdict = "-", f"{type(e).__name__}", "error"
                if verbose:
                    print(f"  {c['id']}: {e}", file=sys.stderr)
            count[verdict] += 1
            line = (
                f"{c['id'][:44]:44s} {c['category'][:30]:30s} {bottleneck or '-':22s} {nxt or '(none)':22s} {verdict}"
            )
            if verbose:
                line += f"  ({time.perf_counter() - t0:.1f}s; right: {c['right']['bottleneck']} / {c['right']['next']})"
            print(line + "".join(f"\n    check failed: {x}" for x in failed))
        totals[p] = count
    print()
    for p, count in totals.items():
        n = sum(count.values())
        print(
            f"{p:5s}: {count['right']} right of {n}, {count['acceptable']} acceptable (bottleneck only), "
            f"{count['wrong']} wrong, {count['error']} errors"
        )
    return totals


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a folder with cases.json and configs/")
    ap.add_argument("--part", choices=("test", "dev", "all"), default="all")
    ap.add_argument("--verbose", action="store_true", help="time per case, the right lists, error messages")
    args = ap.parse_args(argv)
    os.environ.setdefault("INFERTUNE_NO_ANSWER_CACHE", "1")
    run(args.corpus.resolve(), args.part, args.verbose)


if __name__ == "__main__":
    main()

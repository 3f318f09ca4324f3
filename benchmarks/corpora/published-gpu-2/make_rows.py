"""Writes rows.csv of published-gpu-2 from the figures transcribed below, and assigns each row its split.

The figures were read by hand from the two pages named in README.md; nothing here is fetched. The split is fixed
before any estimate is run: within each source group, rows are ordered by SHA-256 of "published-gpu-2/<id>" and
the first ceil(0.4 n) go to `test`, the rest to `dev`.

    python benchmarks/corpora/published-gpu-2/make_rows.py
"""

from __future__ import annotations

import csv
import hashlib
import math
from pathlib import Path

HERE = Path(__file__).parent
COLUMNS = [
    "id", "split", "model", "gpu", "dtype", "quantization", "attn", "mode", "batch", "input_len", "output_len",
    "metric", "value", "source", "note",
]  # fmt: skip

# The Qwen docs' sources live in github.com/QwenLM/Qwen2.5 (named QwenLM/Qwen1.5, then QwenLM/Qwen2, at the time);
# the Qwen2 page was published as https://qwen.readthedocs.io/en/v2.0/benchmark/speed_benchmark.html.
QWEN2_URL = "https://github.com/QwenLM/Qwen2.5/blob/5c4e69cb61953a590ea724e0f0f0fcb06fa979e7/docs/source/benchmark/speed_benchmark.rst"
QWEN2_COMMIT = "Qwen2 docs, commit of 2024-06-11"
QWEN15_URL = (
    "https://github.com/QwenLM/Qwen2.5/blob/14544eb0f7a075b80f2aeb0ca8f1a838e6c26267/docs/source/benchmark/hf_infer.rst"
)
QWEN15_COMMIT = "Qwen1.5 docs, commit of 2024-03-31 (removed 2024-06-06)"

QUANT = {"BF16": "none", "GPTQ-Int8": "gptq-8bit-g128", "GPTQ-Int4": "gptq-4bit-g128", "AWQ": "awq-4bit-g128"}
LENGTHS = (1, 6144, 14336, 30720)

# Qwen2 speed benchmark, transformers tables, rows that ran on one GPU. Speed in tokens/s per input length.
QWEN2 = {
    ("Qwen2-0.5B-Instruct", "BF16"): (49.94, 50.83, 49.56, 49.25),
    ("Qwen2-0.5B-Instruct", "GPTQ-Int8"): (36.35, 36.56, 36.23, 34.61),
    ("Qwen2-0.5B-Instruct", "GPTQ-Int4"): (49.56, 49.63, 48.68, 48.18),
    ("Qwen2-0.5B-Instruct", "AWQ"): (38.78, 38.73, 38.94, 38.19),
    ("Qwen2-1.5B-Instruct", "BF16"): (40.89, 40.86, 40.08, 34.09),
    ("Qwen2-1.5B-Instruct", "GPTQ-Int8"): (31.51, 31.31, 31.19, 28.52),
    ("Qwen2-1.5B-Instruct", "GPTQ-Int4"): (42.47, 42.78, 42.25, 31.30),
    ("Qwen2-1.5B-Instruct", "AWQ"): (33.62, 32.90, 33.24, 32.16),
    ("Qwen2-7B-Instruct", "BF16"): (37.97, 34.74, 26.63, 17.49),
    ("Qwen2-7B-Instruct", "GPTQ-Int8"): (30.85, 31.13, 24.58, 16.69),
    ("Qwen2-7B-Instruct", "GPTQ-Int4"): (36.17, 33.34, 25.81, 17.17),
    ("Qwen2-7B-Instruct", "AWQ"): (33.08, 30.86, 27.61, 17.87),
    ("Qwen2-57B-A14B-Instruct", "GPTQ-Int4"): (5.55, 5.44, 5.31, 4.72),
    ("Qwen2-72B-Instruct", "GPTQ-Int4"): (9.05, 6.79, 4.87, None),  # 30720: two GPUs
    ("Qwen2-72B-Instruct", "AWQ"): (9.96, 7.49, 5.23, None),  # 30720: two GPUs
}

# Qwen1.5 transformers benchmark: the "with FA2" figure of each cell, rows that ran on one GPU.
QWEN15 = {
    ("Qwen1.5-0.5B-Chat", "BF16"): (58.54, 57.93, 59.48, 47.65),
    ("Qwen1.5-0.5B-Chat", "GPTQ-Int4"): (57.18, 57.47, 57.57, 41.84),
    ("Qwen1.5-0.5B-Chat", "AWQ"): (45.04, 43.30, 42.98, 42.18),
    ("Qwen1.5-1.8B-Chat", "BF16"): (51.82, 51.56, 45.17, 29.21),
    ("Qwen1.5-1.8B-Chat", "GPTQ-Int4"): (58.83, 54.82, 41.56, 26.88),
    ("Qwen1.5-1.8B-Chat", "AWQ"): (45.78, 44.95, 42.44, 28.34),
    ("Qwen1.5-4B-Chat", "BF16"): (30.32, 30.72, 23.46, 14.76),
    ("Qwen1.5-4B-Chat", "GPTQ-Int4"): (33.63, 33.93, 25.01, 15.28),
    ("Qwen1.5-4B-Chat", "AWQ"): (28.09, 28.00, 22.95, 14.50),
    ("Qwen1.5-MoE-A2.7B-Chat", "BF16"): (8.49, 8.73, 8.30, 7.40),
    ("Qwen1.5-MoE-A2.7B-Chat", "GPTQ-Int4"): (8.17, 8.64, 8.16, 7.11),
    ("Qwen1.5-7B-Chat", "BF16"): (37.07, 29.29, 19.93, 12.04),
    ("Qwen1.5-7B-Chat", "GPTQ-Int4"): (38.73, 34.33, 22.04, 12.82),
    ("Qwen1.5-7B-Chat", "AWQ"): (32.59, 29.13, 19.98, 12.10),
    ("Qwen1.5-14B-Chat", "BF16"): (26.89, 19.17, 12.91, None),  # 30720: two GPUs
    ("Qwen1.5-14B-Chat", "GPTQ-Int4"): (32.79, 23.30, 14.69, None),
    ("Qwen1.5-14B-Chat", "AWQ"): (27.51, 20.37, 13.50, None),
    ("Qwen1.5-72B-Chat", "GPTQ-Int4"): (9.32, None, None, None),  # longer prompts: 2-4 GPUs
    ("Qwen1.5-72B-Chat", "AWQ"): (10.59, None, None, None),
}

# GLM-4 basic demo stress test (THUDM/GLM-4 basic_demo/README_en.md as first published, 2024-06-05; its
# trans_stress_test.py of the same commit): (dtype, input length) -> (peak GPU memory MiB, first response s,
# decode tokens/s).
GLM4_URL = "https://github.com/THUDM/GLM-4/blob/c0a6d1e0fa744ebc47d5245aa479cb9e455f2976/basic_demo/README_en.md"
GLM4 = {
    ("BF16", 1000): (19047, 0.1554, 27.8193),
    ("BF16", 8000): (20629, 0.8199, 31.8613),
    ("BF16", 32000): (27779, 4.3554, 14.4108),
    ("BF16", 128000): (57379, 38.1467, 3.4205),
    ("BF16", 200000): (74497, 98.4930, 2.3653),  # GLM-4-9B-Chat-1M (the README's version of 2024-09-24 says so)
    ("Int4", 1000): (8251, 0.1667, 23.3903),
    ("Int4", 8000): (9613, 0.8629, 23.4248),
    ("Int4", 32000): (16065, 4.3906, 14.6553),
}
NOTE_GLM4 = (
    "GLM-4 basic demo stress test: one A100-SXM4-80GB, CUDA 12.3, transformers 4.40.0 and torch >= 2.3 "
    "(the demo's requirements), the model's own remote code (trust_remote_code; its attention calls torch SDPA); "
    "batch 1, random prompt tokens, greedy, at most 512 new tokens (EOS may stop it earlier), a TextIteratorStreamer "
    "timed from a thread; one warm-up generate, mean of 3 runs"
)
GLM4_METRIC_NOTE = {
    "ttft_s": "'Prefilling / first response': time from the generate call to the streamer's first text chunk",
    "tokens_per_s": (
        "'Decode speed': streamer text chunks after the first over the time after it; a chunk is a word or a CJK "
        "character, one token or more, so the token rate can be higher than this"
    ),
    "device_used_bytes": "peak GPU memory 'calculated based on the peak value' (read as the device's used memory, MiB)",
}

NOTE_QWEN2 = (
    "Qwen2 docs speed table (transformers part): A100 80GB, CUDA 11.8, torch 2.1.2, flash-attn 2.3.3, "
    "transformers 4.38.2, AutoGPTQ 0.7.1, AutoAWQ 0.2.4; batch 1, 2048 new tokens; tokens/s read as new tokens "
    "over the whole generate call (the figure does not grow with the prompt, so prompt tokens are not counted); "
    "attention implementation not named, flash-attn listed in the environment, read as flash_attention_2"
)
NOTE_QWEN15 = (
    "Qwen1.5 docs HF-inference table, the 'with FA2' figure: A100 80GB, CUDA 12.3, torch 2.1.2, flash-attn 2.5.6, "
    "transformers version not given (>= 4.37 for Qwen1.5); batch 1, 2048 new tokens; tokens/s read as new tokens "
    "over the whole generate call"
)


def slug(model: str, quant: str, length: int) -> str:
    return f"{model.lower().replace('-instruct', '').replace('-chat', '')}-{quant.lower()}-in{length}"


def rows() -> list[dict]:
    out = []
    for group, table, url, where, note in (
        ("qwen2-docs", QWEN2, QWEN2_URL, QWEN2_COMMIT, NOTE_QWEN2),
        ("qwen1.5-docs", QWEN15, QWEN15_URL, QWEN15_COMMIT, NOTE_QWEN15),
    ):
        for (model, quant), speeds in table.items():
            for length, value in zip(LENGTHS, speeds, strict=True):
                if value is None:
                    continue
                extra = ""
                if "MoE" in model or "A14B" in model:
                    extra = "; MoE"
                    if "Qwen1.5" in model:
                        extra += " (the page says its HF MoE code runs much slower than expected)"
                out.append(
                    {
                        "group": group,
                        "id": slug(model, quant, length),
                        "model": model,
                        "gpu": "A100 80GB",
                        "dtype": "bfloat16",
                        "quantization": QUANT[quant],
                        "attn": "flash_attention_2",
                        "mode": "eager",
                        "batch": 1,
                        "input_len": length,
                        "output_len": 2048,
                        "metric": "e2e_tokens_per_s",
                        "value": value,
                        "source": url,
                        "note": f"{note}; {quant}{extra}; {where}",
                    }
                )
    for (dtype, length), (mib, first_s, decode) in GLM4.items():
        model = "glm-4-9b-chat-1m" if length > 131072 else "glm-4-9b-chat"
        quant = "bnb-fp4" if dtype == "Int4" else "none"
        qnote = (
            "Int4 read as bitsandbytes BitsAndBytesConfig(load_in_4bit=True), the line commented out in the script: "
            "FP4, no double quantization, compute dtype float32 by default in transformers 4.40"
            if dtype == "Int4"
            else "BF16"
        )
        for metric, value in (("ttft_s", first_s), ("tokens_per_s", decode), ("device_used_bytes", mib * 2**20)):
            out.append(
                {
                    "group": "glm4-demo",
                    "id": f"{model}-{dtype.lower()}-in{length}-{metric.split('_')[0]}",
                    "model": model,
                    "gpu": "A100 80GB",
                    "dtype": "bfloat16",
                    "quantization": quant,
                    "attn": "sdpa",
                    "mode": "eager",
                    "batch": 1,
                    "input_len": length,
                    "output_len": 512,
                    "metric": metric,
                    "value": value,
                    "source": GLM4_URL,
                    "note": f"{NOTE_GLM4}; {qnote}; {GLM4_METRIC_NOTE[metric]}",
                }
            )
    return out


def split(all_rows: list[dict]) -> None:
    """Within each group: order by SHA-256 of 'published-gpu-2/<id>', the first ceil(0.4 n) are test."""
    groups: dict[str, list[dict]] = {}
    for r in all_rows:
        groups.setdefault(r["group"], []).append(r)
    for members in groups.values():
        members.sort(key=lambda r: hashlib.sha256(f"published-gpu-2/{r['id']}".encode()).hexdigest())
        n_test = math.ceil(0.4 * len(members))
        for i, r in enumerate(members):
            r["split"] = "test" if i < n_test else "dev"


def main() -> None:
    all_rows = rows()
    ids = [r["id"] for r in all_rows]
    assert len(ids) == len(set(ids)), "ids must be unique"
    split(all_rows)
    with (HERE / "rows.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(all_rows)  # in the pages' order; the split column carries the split
    for g in sorted({r["group"] for r in all_rows}):
        members = [r for r in all_rows if r["group"] == g]
        print(g, len(members), "rows,", sum(r["split"] == "test" for r in members), "test")


if __name__ == "__main__":
    main()

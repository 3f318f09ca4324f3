"""The calibration's microbenchmarks (estimate/calibration.py keeps what they measure): F.linear per dtype and
activation rows, generate's fixed costs per step and per decoder layer on tiny Llamas, and attention as
transformers runs it. Every cell keeps the fastest of several passes over all cells, and each pass times
repeated calls (`time_calls`, which the CPU probe uses too)."""

from __future__ import annotations

import time

from infertune.estimate.expected import attention_flops
from infertune.estimate.rates import ATTN_HEADS, ATTN_ROWS, LARGE_MATRIX, PREFILL_LEN
from infertune.probe.host import release_freed_memory

ROWS = (1, 4, 16, 64, 256)
DTYPES = ("float32", "bfloat16", "float16")
ATTNS = ("eager", "sdpa")


def time_calls(
    fn, seconds: float, sync=None, calls: int = 3, typical: bool = False, slow_s: float | None = None, before=None
) -> float:
    """The fastest of the calls made in ~`seconds` (at least `calls`, after one warm-up): what the machine
    allows (contention only ever adds time), for the probe's bound. With `typical`, the median call: what a
    run meets, for the expected figure (on the development CPU the median F.linear call of a quiet pass was
    1.05-1.14x the fastest; a trial reports the mean of its calls). The calibration measures every cell in
    several passes and keeps the quietest pass, so a busy spell still hits one pass, not all. A warm-up call
    slower than `slow_s` (an emulated dtype: seconds a call) is figure enough: it is returned as it is.
    `before`, when given, runs before every call, outside the timed span."""
    before = before or (lambda: None)
    before()
    t = time.perf_counter()
    fn()
    if sync:
        sync()
    if slow_s is not None and (warm := time.perf_counter() - t) > slow_s:
        return warm
    times: list[float] = []
    end = time.perf_counter() + seconds
    while len(times) < calls or time.perf_counter() < end:
        before()
        t = time.perf_counter()
        fn()
        if sync:
            sync()
        times.append(time.perf_counter() - t)
        if len(times) >= 200:
            break
    return sorted(times)[(len(times) - 1) // 2] if typical else min(times)


def measure_linear(
    device: str = "cpu",
    seconds: float = 0.05,
    elems_per_matrix: int = LARGE_MATRIX,
    matrices: int = 8,
    rounds: int = 3,
    sync=None,
) -> dict[str, dict[int, float]]:
    """Seconds per weight element of F.linear by dtype and activation rows; `matrices` weights cycled so
    they come from memory, not the caches (8 x 4M elements: 128 MB in fp32, 64 MB in half; the small
    matrices: 64 x 410k). Every cell is timed in `rounds` passes over all cells and keeps its fastest: a busy
    spell on a shared host then hits one pass of a cell, not all of them."""
    import torch

    n = int(elems_per_matrix**0.5)
    cells = []
    for name in DTYPES:
        dtype = getattr(torch, name)
        ws = [torch.randn(n, n, dtype=dtype, device=device) * 0.01 for _ in range(matrices)]
        for rows in ROWS:
            use = ws if rows < 64 else ws[:1]  # from 64 rows on it is compute-bound: one matrix is enough
            cells.append((name, rows, use, torch.randn(rows, n, dtype=dtype, device=device)))
    best: dict[tuple[str, int], float] = {}
    slow: set[str] = set()
    for _ in range(rounds):
        for name, rows, use, x in cells:
            if name in slow and rows > min(r for (d, r) in best if d == name):
                continue

            def run(use=use, x=x):
                for w in use:
                    torch.nn.functional.linear(x, w)

            t = time_calls(run, seconds, sync, typical=True) / (len(use) * n * n)
            best[name, rows] = min(t, best.get((name, rows), t))
            if t * len(use) * n * n > 0.5:  # an emulated dtype: larger shapes would take minutes
                slow.add(name)
    out: dict[str, dict[int, float]] = {}
    for name in DTYPES:
        measured = sorted(r for (d, r) in best if d == name)
        out[name] = {r: best[name, r] for r in measured}
        for r in ROWS:  # beyond the largest measured row count: linear in rows (compute-bound)
            if r > measured[-1]:
                out[name][r] = out[name][measured[-1]] * r / measured[-1]
    return out


def _tiny_model(layers: int, attn: str, device: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_hidden_layers=layers,
        vocab_size=256,
        max_position_embeddings=512,
        tie_word_embeddings=True,
    )
    cfg._attn_implementation = attn
    torch.manual_seed(0)
    return LlamaForCausalLM(cfg).to(device).eval()  # type: ignore[arg-type]  # @wraps on .to: mypy reads device as self


def measure_overhead(
    device: str = "cpu",
    seconds: float = 0.4,
    rounds: int = 3,
    sync=None,
    lengths: tuple[int, int] = (8, 40),
    calls: int = 3,
) -> tuple[dict[str, float], dict[str, float]]:
    """(step_s, layer_s) by attention implementation: generate on tiny Llamas of 1 and 5 layers, 8 and 40 new
    tokens; per step = (t40 - t8) / 32; per layer = slope between the two depths; the rest is per step."""
    import torch

    step: dict[str, float] = {}
    layer: dict[str, float] = {}
    ids = torch.ones(1, 8, dtype=torch.long, device=device)
    kw = {"do_sample": False, "pad_token_id": 0, "temperature": None, "top_p": None, "top_k": None}
    models = {(attn, depth): _tiny_model(depth, attn, device) for attn in ATTNS for depth in (1, 5)}
    best: dict[tuple[str, int, int], float] = {}
    for _ in range(rounds):  # passes over every cell, each keeping its fastest (see measure_linear)
        for (attn, depth), m in models.items():
            for n in lengths:

                def gen(m=m, n=n):
                    with torch.inference_mode():
                        m.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n, **kw)

                t = time_calls(gen, seconds / 4, sync, calls, typical=True)
                best[attn, depth, n] = min(t, best.get((attn, depth, n), t))
    for attn in ATTNS:
        short, long = lengths
        per_step = {d: max(best[attn, d, long] - best[attn, d, short], 0.0) / (long - short) for d in (1, 5)}
        layer[attn] = max(per_step[5] - per_step[1], 0.0) / 4
        step[attn] = max(per_step[1] - layer[attn], 0.0)
    return step, layer


def measure_attention(
    device: str = "cpu",
    seconds: float = 0.05,
    sync=None,
    heads: int = ATTN_HEADS,
    head_dim: int = 64,
    rows: int = ATTN_ROWS,
) -> dict[str, dict[str, dict[str, float]]]:
    """Attention FLOP/s per phase, implementation and dtype: one query over a 2,048-token cache (decode, `rows`
    sequences, K/V from memory as in a real cache) and a causal 1,024-token prefill: eager over `rows` sequences
    (128 MB of fp32 scores, beyond the caches) and, as 'prefill_one', over one (32 MB, partly in a large L3;
    the expected model interpolates by the score matrix's size, `eager_prefill_rate`), sdpa over one (tiled).
    On a CPU each eager prefill call starts on fresh pages (host.release_freed_memory), as in a trial's fresh
    process: a heap warmed by the calibration's earlier work made the one-sequence rate 1.6-3.5x what a fresh
    process measures. Decode is not trimmed: a step's small buffers reuse the heap's pages in a model too (trimmed,
    it measured 1.3-6.4x slower than the calibration before)."""
    import torch
    import torch.nn.functional as F

    def eager(q, k, v, causal):
        w = torch.matmul(q, k.transpose(-1, -2)) * head_dim**-0.5
        if causal:
            n = q.shape[-2]
            w = w + torch.full((n, n), float("-inf"), dtype=w.dtype, device=w.device).triu(1)
        return torch.matmul(torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype), v)

    def sdpa(q, k, v, causal):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    fns, L = {"eager": eager, "sdpa": sdpa}, PREFILL_LEN
    cells = [("decode", name, rows, 1, 2048) for name in fns] + [  # phase, implementation, sequences, q, kv
        ("prefill", "eager", rows, L, L),
        ("prefill", "sdpa", 1, L, L),
        ("prefill_one", "eager", 1, L, L),
    ]
    out: dict[str, dict[str, dict[str, float]]] = {"decode": {}, "prefill": {}, "prefill_one": {}}
    for phase, name, n, nq, nkv in cells:
        causal, fn = phase != "decode", fns[name]
        fresh = release_freed_memory if device == "cpu" and name == "eager" and causal else None
        for dtype in DTYPES:
            dt = getattr(torch, dtype)
            q = torch.randn(n, heads, nq, head_dim, device=device).to(dt)
            k, v = (torch.randn(n, heads, nkv, head_dim, device=device).to(dt) for _ in range(2))
            with torch.inference_mode():
                t = time_calls(
                    lambda q=q, k=k, v=v, fn=fn, causal=causal: fn(q, k, v, causal),
                    seconds,
                    sync,
                    typical=True,
                    slow_s=0.5,
                    before=fresh,
                )
            counted = attention_flops(heads, head_dim, nq, nkv, n, causal and name != "eager")
            out[phase].setdefault(name, {})[dtype] = counted / t
    return out

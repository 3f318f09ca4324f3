"""In-model factors: a reference model generating on this host, against what the microbenchmarks predict for it.

The calibration's microbenchmarks (calibration.py) time each kind of work alone: F.linear over cycled weights,
attention kernels, the per-step and per-layer cost of generate on hidden-64 models. A real forward pass also
pays what none of them sees: the norms, rotary embeddings, activations and residual adds at the model's width,
caches evicted by the work in between, the pace of a whole forward pass. On the development CPU the expected
figures came out 0.38-0.97 of measured on SmolLM2 and on two random-weight Llamas of other shapes, never above 1
(benchmarks/README.md, speed_accuracy).

So the calibration ends by running REFERENCE, a random-weight Llama of its own shape (hidden 768, 12 layers,
GQA 12/4, vocab 8192: 82 M parameters, 330 MB in fp32, beyond the caches; none of the models being estimated),
through `generate` per dtype and attention implementation: a 128-token prompt, 16 new tokens, the median of
`calls` calls, in the quieter of two passes. The ratio measured / expected of everything except attention (which
has its own measured rates) is kept per phase (prefill: time to first token; decode: time per token) and
multiplies those parts of every expected figure on this host (`Calibration.in_model`). One shape stands for all:
the factor is the host's in-model efficiency, not a fit to the model asked about. Measured on CPUs; a CUDA
calibration keeps 1.
"""

from __future__ import annotations

import itertools
import statistics
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infertune.estimate.rates import Calibration

REFERENCE: dict[str, Any] = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 768,
    "intermediate_size": 2048,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "vocab_size": 8192,
    "max_position_embeddings": 1024,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
}
PROMPT, NEW_TOKENS = 128, 16
DTYPES = ("float32", "bfloat16")  # fp16 on a CPU is emulated and slow: 1 (what the microbenchmarks say)
LIMITS = (0.5, 3.0)  # a factor outside these says the run went wrong, not the model: clamped


class _Steps:
    """A generate streamer that keeps when each new token arrived (the first put is the prompt)."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self._prompt = True

    def put(self, value) -> None:
        if self._prompt:
            self._prompt = False
            return
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass


def _generate(model, ids, calls: int, new_tokens: int) -> tuple[float, float]:
    """(time to first token, time per output token): the medians of `calls` timed calls after one warm-up."""
    import torch

    kw = {
        "attention_mask": torch.ones_like(ids),
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": False,
        "pad_token_id": 0,
        "temperature": None,
        "top_p": None,
        "top_k": None,
    }
    ttft, tpot = [], []
    for i in range(calls + 1):
        steps = _Steps()
        with torch.inference_mode():
            start = time.perf_counter()
            model.generate(ids, streamer=steps, **kw)
        if i and len(steps.times) >= 2:
            ttft.append(steps.times[0] - start)
            tpot.append((steps.times[-1] - steps.times[0]) / (len(steps.times) - 1))
    return statistics.median(ttft), statistics.median(tpot)


def _expected(cal: Calibration, p, dtype: str, attn: str, prompt: int, new_tokens: int):
    """The expected figures for the reference (profile `p`) at the anchor's shape; `cal` without in-model factors."""
    from infertune.estimate.expected import expected_speed
    from infertune.estimate.memory import EstimateSettings, estimate_memory
    from infertune.estimate.quant import Quantization

    s = EstimateSettings(
        dtype=dtype,
        attn=attn,
        input_len=prompt,
        max_new_tokens=new_tokens,
        platform="cpu",
        quantization=Quantization(method="none"),
    )
    return expected_speed(p, estimate_memory(p, s), s, None, cal)


def factor(measured: float, expected: float, attention: float) -> float:
    """measured / expected of what is not attention, within LIMITS."""
    rest = expected - attention
    x = (measured - attention) / rest if rest > 0 else 1.0
    return min(max(x, LIMITS[0]), LIMITS[1])


def measure_in_model(
    cal: Calibration,
    device: str = "cpu",
    calls: int = 3,
    rounds: int = 2,
    attns: tuple[str, ...] = ("eager", "sdpa"),
    reference: dict | None = None,
    prompt: int = PROMPT,
    new_tokens: int = NEW_TOKENS,
) -> dict[str, dict[str, dict[str, float]]]:
    """phase ('prefill' | 'decode') -> attention implementation -> dtype -> factor (see the module's text).
    `rounds` passes over every cell, each keeping its quietest pass, as the microbenchmarks do."""
    import copy

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    reference = reference or REFERENCE
    cfg = LlamaConfig(**{k: v for k, v in reference.items() if k not in ("model_type", "architectures")})
    torch.manual_seed(0)
    base = LlamaForCausalLM(cfg).to(device).eval()  # type: ignore[arg-type]  # @wraps on .to: mypy reads device as self
    models = {d: copy.deepcopy(base).to(dtype=getattr(torch, d)) if d != "float32" else base for d in DTYPES}
    ids = torch.randint(16, cfg.vocab_size, (1, prompt), device=device)
    best: dict[tuple[str, str], tuple[float, float]] = {}
    for _ in range(rounds):
        for (dtype, model), attn in itertools.product(models.items(), attns):
            model.set_attn_implementation(attn)
            ttft, tpot = _generate(model, ids, calls, new_tokens)
            was = best.get((dtype, attn), (ttft, tpot))
            best[dtype, attn] = (min(ttft, was[0]), min(tpot, was[1]))
    from infertune.probe.model import profile_model

    p, plain = profile_model(dict(reference)), cal.model_copy(update={"in_model_x": {}})
    out: dict[str, dict[str, dict[str, float]]] = {"prefill": {}, "decode": {}}
    for (dtype, attn), (ttft, tpot) in best.items():
        e = _expected(plain, p, dtype, attn, prompt, new_tokens)
        out["prefill"].setdefault(attn, {})[dtype] = factor(ttft, e.ttft_s, e.prefill_attention_s)
        out["decode"].setdefault(attn, {})[dtype] = factor(tpot, e.tpot_s, e.attention_s_per_step)
    return out

"""The advisor: diagnose, check every technique against the facts, estimate each compatible one, rank,
and propose exactly one change as `next`.

Everything numeric in an Advice is an estimate (`kind: "estimate"`); `validate` is the command that
measures it. Shorter prompts, outputs or less concurrency are never a recommendation: they are listed
apart, as workload trade-offs.
"""

from __future__ import annotations

import shlex
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from infertune import _callable
from infertune.config import InferenceConfig, serve_flags
from infertune.diagnose import Diagnosis, diagnose, serving_times, worst_device
from infertune.errors import UserError
from infertune.estimate import Estimate, _largest, estimate
from infertune.estimate.memory import EstimateSettings, Quantization
from infertune.estimate.placement import parse_max_memory
from infertune.measure.results import TrialResult
from infertune.schema import SCHEMA_VERSION
from infertune.techniques import REGISTRY, Facts, Setup, Technique
from infertune.techniques.serving import vllm_command

ESTIMATOR_QUANT = {"none": "none", "bnb-8bit": "bnb-int8", "bnb-4bit": "bnb-nf4-dq", "awq": "awq", "gptq": "gptq",
                   "gguf": "none", "torchao-int4": "int4", "torchao-int8": "int8", "quanto-int8": "int8", "fp8": "fp8"}
QUANT_CONFIGS: dict[str, dict[str, Any]] = {  # from_pretrained(quantization_config=...) accepts these dicts
    "bnb-8bit": {"quant_method": "bitsandbytes", "load_in_8bit": True},
    "bnb-4bit": {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4",
                 "bnb_4bit_use_double_quant": True, "bnb_4bit_compute_dtype": "bfloat16"},
    "torchao-int4": {"quant_method": "torchao", "quant_type": "int4_weight_only", "quant_type_kwargs": {"group_size": 128}},
    "torchao-int8": {"quant_method": "torchao", "quant_type": "int8_weight_only"},
    "quanto-int8": {"quant_method": "quanto", "weights": "int8"},
}


class Expected(BaseModel):
    kind: Literal["estimate"] = "estimate"
    peak_bytes_before: int
    peak_bytes_after: int
    fits_before: bool
    fits_after: bool
    ttft_s_before: float
    ttft_s_after: float
    tpot_s_before: float
    tpot_s_after: float
    tokens_per_s_before: float
    tokens_per_s_after: float
    max_input_len_after: int | None
    max_concurrency_after: int | None
    note: str | None = None  # what the roofline cannot show (Python overhead, kernel quality)


class Compatibility(BaseModel):
    ok: bool
    issues: list[str]


class Snippet(BaseModel):
    python: str
    serve: str  # the `transformers serve` command (or the engine's)


class Recommendation(BaseModel):
    technique: str
    family: str
    title: str
    addresses: list[str]
    settings: dict[str, Any]  # the knobs this one change sets
    expected: Expected
    tradeoffs: list[str]
    docs: list[str]
    compatibility: Compatibility
    # the public JSON names it `validate` (a name pydantic's BaseModel already uses)
    validate_cmd: str = Field(serialization_alias="validate")
    run_file: str | None = None  # when the command needs a run file: its YAML
    snippet: Snippet

    model_config = ConfigDict(serialize_by_alias=True)


class Rejected(BaseModel):
    technique: str
    reasons: list[str]


class WorkloadTradeoff(BaseModel):
    kind: Literal["workload-tradeoff"] = "workload-tradeoff"
    change: str
    value: int | None
    note: str


class Advice(BaseModel):
    kind: Literal["advice"] = "advice"
    schema_version: str = SCHEMA_VERSION
    model: str
    hardware: dict[str, Any]
    workload: dict[str, int]
    current: Setup
    diagnosis: Diagnosis
    next: Recommendation | None
    recommendations: list[Recommendation]
    rejected: list[Rejected]
    workload_tradeoffs: list[WorkloadTradeoff]
    assumptions: list[str]
    questions: list[str]

    model_config = ConfigDict(serialize_by_alias=True)


# --- Setup -> estimator, config, commands -----------------------------------------------------------------


def settings_for(f: Facts, s: Setup, **update: Any) -> EstimateSettings:
    """How the estimator sees a setup: serial batching holds one call's sequences at a time; static batching
    pads all concurrent requests into one call; continuous batching holds them all with a chunked prefill."""
    b, c = f.batch, f.concurrency
    batch, conc, chunk = {"serial": (b, 1, None), "static": (b * c, 1, None),
                          "continuous": (1, b * c, s.max_batch_tokens)}[s.batching]
    attn = "eager" if s.attn in ("eager", "paged|eager") else s.attn
    return EstimateSettings(
        dtype=s.dtype, quantization=Quantization.parse(ESTIMATOR_QUANT.get(s.quantization, "none")), kv_cache=s.kv_cache,
        attn=attn, prefill_chunk=chunk, input_len=f.input_len, max_new_tokens=f.max_new_tokens, batch=batch,
        # pipeline stages split the layers like tensor parallel splits each layer: per GPU, 1/(tp x pp) of them
        concurrency=conc, platform=f.platform, tp=s.tp * s.pp,
    ).model_copy(update=update)


def estimate_setup(f: Facts, s: Setup, **update: Any) -> Estimate:
    gpus = s.tp * s.pp if s.tp * s.pp > 1 else (f.gpus if s.device_map == "auto" else 1)
    mm = parse_max_memory(s.max_memory) if s.max_memory and f.platform == "cuda" else None
    return estimate(f.profile, settings_for(f, s, **update), f.accelerator, model=f.model, gpus=gpus, max_memory=mm)


def config_for(s: Setup, bf16: bool = True) -> InferenceConfig:
    """`bf16`: the target has bf16 (else quantized matmuls compute in fp16)."""
    load: dict[str, Any] = {}
    if s.quantization in QUANT_CONFIGS:
        q = dict(QUANT_CONFIGS[s.quantization])
        if "bnb_4bit_compute_dtype" in q and not bf16:
            q["bnb_4bit_compute_dtype"] = "float16"
        load["quantization_config"] = q
    if s.kernels:
        load["use_kernels"] = True
    cache = None if s.kv_cache == "dynamic" else s.kv_cache
    return InferenceConfig(
        dtype=s.dtype, attn_implementation=s.attn, cache_implementation=cache, batching=s.batching,
        max_batch_tokens=s.max_batch_tokens, cb_block_size=s.cb_block_size, cb_num_blocks=s.cb_num_blocks,
        cache_config={"backend": "quanto", "nbits": 4} if s.kv_cache == "quantized" else None,
        device_map=s.device_map, max_memory=s.max_memory, load_kwargs=load,
        tp_size=s.tp if s.engine == "transformers" else 1,  # another engine's parallelism is in its command
    )


def serve_flags_for(s: Setup) -> list[str]:
    """The `transformers serve` flags of a setup (the KV-cache kind and static batching have none)."""
    return serve_flags(dtype=s.dtype, attn=s.attn, compile=s.compile,
                       quantization=s.quantization if s.quantization in ("bnb-4bit", "bnb-8bit") else None,
                       continuous_batching=s.batching == "continuous", max_batch_tokens=s.max_batch_tokens,
                       block_size=s.cb_block_size, num_blocks=s.cb_num_blocks)


def serve_command(f: Facts, s: Setup) -> str:
    if s.engine == "vllm":
        return vllm_command(f.model, s, f.input_len + f.max_new_tokens, max(f.concurrency * f.batch, 1))
    return shlex.join(["transformers", "serve", "--host", "127.0.0.1", *serve_flags_for(s)])


def python_snippet(f: Facts, s: Setup) -> str:
    cfg = config_for(s, f.accelerator.bf16)
    code = cfg.python_snippet(f.model, f.max_new_tokens, tp=s.tp)
    if s.batching == "continuous":
        load = code.split("messages =")[0]
        code = (load.replace("from transformers import AutoModelForCausalLM, AutoTokenizer",
                             "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
                             "from transformers.generation import ContinuousBatchingConfig, GenerationConfig")
                + "prompts = [[{'role': 'user', 'content': 'Hello!'}], [{'role': 'user', 'content': 'Hi there'}]]\n"
                "inputs = [tok.apply_chat_template(p, add_generation_prompt=True) for p in prompts]\n"
                f"gen = GenerationConfig(max_new_tokens={f.max_new_tokens}, do_sample=False, "
                "eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)\n"
                f"cb = ContinuousBatchingConfig(max_batch_tokens={s.max_batch_tokens}, num_blocks={s.cb_num_blocks}, "
                f"page_size={s.cb_block_size or 256})  # page_size: block_size before transformers 5.17\n"
                "outputs = model.generate_batch(inputs=inputs, generation_config=gen, continuous_batching_config=cb)\n"
                "for rid, o in outputs.items():\n    print(rid, tok.decode(o.generated_tokens, skip_special_tokens=True))\n")
    if s.engine == "vllm":
        code = f"# serve with vLLM instead of transformers:\n# {serve_command(f, s)}\n" + code
    return code


MEASURE_FLAGS = {"dtype", "attn", "kv_cache"}  # what `infertune measure` takes as flags


def validation(f: Facts, s: Setup) -> tuple[str, str | None]:
    """The infertune command that measures this setup on the workload (and a run file when flags are not enough)."""
    shape = f"--model {f.model} --input-len {f.input_len} --max-new-tokens {f.max_new_tokens} --batch {f.batch}"
    if s.engine != "transformers":
        return (f"{serve_command(f, s)}  # then: infertune loadtest --url http://127.0.0.1:8000 "
                f"--concurrency {f.concurrency}"), None
    if f.concurrency > 1:
        shape += f" --concurrency {f.concurrency} --batching {s.batching}"
        for flag, v in (("--max-batch-tokens", s.max_batch_tokens), ("--cb-block-size", s.cb_block_size),
                        ("--cb-num-blocks", s.cb_num_blocks)):
            if v:
                shape += f" {flag} {v}"
    changed = set(Setup().changes(s)) - {"batching", "max_batch_tokens", "cb_block_size", "cb_num_blocks"}
    if changed <= MEASURE_FLAGS | {"compile"} and s.kv_cache != "quantized":
        attn = shlex.quote(s.attn)
        flags = f" --dtype {s.dtype} --attn {attn}" + (f" --kv-cache {s.kv_cache}" if s.kv_cache != "dynamic" else "")
        return f"infertune measure {shape}{flags}", None
    import yaml

    cfg = config_for(s, f.accelerator.bf16).model_dump(exclude_defaults=True)
    run = {"model": f.model, "input_len": f.input_len, "max_new_tokens": f.max_new_tokens, "batch": f.batch,
           "config": cfg}
    if f.concurrency > 1:
        run["concurrency"] = f.concurrency
    return "infertune measure --workload infertune-run.yaml", yaml.safe_dump(run, sort_keys=False)


# --- the advisor ----------------------------------------------------------------------------------------


def _expected(f: Facts, before: Estimate, after: Estimate, s_before: Setup, s_after: Setup) -> Expected:
    wb, wa = worst_device(before), worst_device(after)
    tb, ta = serving_times(f, s_before, before), serving_times(f, s_after, after)
    note = None
    if s_after.compile and not s_before.compile:
        note = "removes Python/launch overhead, which the roofline does not model: measure it"
    elif s_after.kernels and not s_before.kernels:
        note = "fused kernels cut launches and memory traffic beyond the roofline's view: measure it"
    elif s_after.attn != s_before.attn and "eager" not in s_before.attn:
        note = "a faster attention kernel: the roofline bound is unchanged; the gain shows at long prompts"
    return Expected(
        peak_bytes_before=wb.needed_bytes if wb else before.memory.total_bytes,
        peak_bytes_after=wa.needed_bytes if wa else after.memory.total_bytes,
        fits_before=bool(wb and wb.fits), fits_after=bool(wa and wa.fits),
        ttft_s_before=before.speed.ttft_s + tb["queue_wait_mean_s"], ttft_s_after=after.speed.ttft_s + ta["queue_wait_mean_s"],
        tpot_s_before=before.speed.tpot_s, tpot_s_after=after.speed.tpot_s,
        tokens_per_s_before=tb["tokens_per_s"], tokens_per_s_after=ta["tokens_per_s"],
        max_input_len_after=after.max_input_len, max_concurrency_after=after.max_concurrency, note=note,
    )


def _recommend(f: Facts, t: Technique, current: Setup, base: Estimate, issues: list[str]) -> Recommendation:
    after = t.apply(f, current)
    est = estimate_setup(f, after)
    cmd, run_file = validation(f, after)
    return Recommendation(
        technique=t.id, family=t.family, title=t.title, addresses=list(t.addresses), settings=current.changes(after),
        expected=_expected(f, base, est, current, after), tradeoffs=list(t.tradeoffs), docs=list(t.docs),
        compatibility=Compatibility(ok=True, issues=issues), validate_cmd=cmd, run_file=run_file,
        snippet=Snippet(python=python_snippet(f, after), serve=serve_command(f, after)),
    )


def _helps(r: Recommendation, category: str) -> bool:
    x = r.expected
    if category in ("load-memory", "kv-cache-growth", "long-input-attention"):
        return x.peak_bytes_after < x.peak_bytes_before or (x.fits_after and not x.fits_before)
    if category == "concurrency":
        return (x.tokens_per_s_after > x.tokens_per_s_before * 1.05 or x.ttft_s_after < x.ttft_s_before * 0.95
                or (x.fits_after and not x.fits_before))
    if category in ("decode-speed", "prefill-speed"):
        faster = (x.tpot_s_after < x.tpot_s_before * 0.95 if category == "decode-speed"
                  else x.ttft_s_after < x.ttft_s_before * 0.95)
        return faster or (x.note is not None and x.fits_after)
    return False


def _rank_key(f: Facts, r: Recommendation, category: str) -> tuple:
    x, prio = r.expected, REGISTRY[r.technique].rank(f)
    if category in ("load-memory", "kv-cache-growth", "long-input-attention", "concurrency"):
        # what makes it fit first; among those, the expert's order (cheap and lossless before lossy)
        return (not x.fits_after, prio, x.peak_bytes_after)
    return (prio, x.tpot_s_after)


def _tradeoffs(f: Facts, s: Setup, e: Estimate) -> list[WorkloadTradeoff]:
    out: list[WorkloadTradeoff] = []
    worst = worst_device(e)
    if not worst or worst.fits:
        return out
    if e.max_input_len and e.max_input_len < f.input_len:
        out.append(WorkloadTradeoff(change="input_len", value=e.max_input_len,
                                    note=f"prompts of at most {e.max_input_len:,} tokens fit (asked: {f.input_len:,})"))

    def fits_with(n: int) -> bool:
        w = worst_device(estimate_setup(f, s, max_new_tokens=n))
        return bool(w and w.fits)

    t = _largest(1, f.max_new_tokens, fits_with)
    if t and t < f.max_new_tokens:
        out.append(WorkloadTradeoff(change="max_new_tokens", value=t,
                                    note=f"at most {t:,} generated tokens fit (asked: {f.max_new_tokens:,})"))
    if f.concurrency > 1 and s.batching != "serial" and e.max_concurrency and e.max_concurrency < f.concurrency * f.batch:
        out.append(WorkloadTradeoff(change="concurrency", value=e.max_concurrency,
                                    note=f"at most {e.max_concurrency} sequences in flight fit (asked: {f.concurrency * f.batch})"))
    if not out:
        out.append(WorkloadTradeoff(change="none", value=None,
                                    note="no shorter prompt, output or concurrency fits: the weights alone do not"))
    return out


def advise(f: Facts, current: Setup, assumptions: list[str] | None = None,
           questions: list[str] | None = None, measured: TrialResult | None = None) -> Advice:
    """`measured`: a trial of the current setup on this workload (from `infertune measure --output`)."""
    base = estimate_setup(f, current)
    prompt_only = estimate_setup(f, current, max_new_tokens=1)
    diag = diagnose(f, current, base, prompt_only, measured)

    candidates: list[Recommendation] = []
    rejected: list[Rejected] = []
    for t in REGISTRY.values():
        if t.applied(current):
            continue
        c = t.check(f, current)
        if c.blockers:
            rejected.append(Rejected(technique=t.id, reasons=c.blockers))
            continue
        try:
            candidates.append(_recommend(f, t, current, base, c.issues))
        except UserError as e:  # its estimate cannot place the model at all (weights above every budget)
            rejected.append(Rejected(technique=t.id, reasons=[str(e)]))

    ordered: list[Recommendation] = []
    kept = []
    for finding in diag.ranked:
        helping = sorted((r for r in candidates if finding.category in r.addresses and _helps(r, finding.category)),
                         key=lambda r: _rank_key(f, r, finding.category))
        if finding.severity == "minor" and not helping:
            continue  # room to improve only if something compatible improves it
        kept.append(finding)
        ordered += [r for r in helping if r not in ordered]
    if not kept:
        from infertune.diagnose import Finding

        worst = worst_device(base)
        kept = [Finding(category="none", severity="minor", evidence=[
            f"fits with {(worst.headroom_bytes if worst else 0) / 2**30:.2f} GiB to spare and no compatible change is "
            "expected to help this workload (estimate)"])]
    diag = diag.model_copy(update={"ranked": kept, "bottleneck": kept[0].category})

    return Advice(
        model=f.model,
        hardware={"accelerator": f.accelerator.name, "source": f.accelerator.source, "gpus": f.gpus,
                  "memory_bytes": f.accelerator.memory_bytes, "platform": f.platform,
                  "compute_capability": f.accelerator.compute_capability, "cpu_ram_bytes": f.cpu_ram_bytes},
        workload={"input_len": f.input_len, "max_new_tokens": f.max_new_tokens, "batch": f.batch,
                  "concurrency": f.concurrency},
        current=current, diagnosis=diag, next=ordered[0] if ordered else None, recommendations=ordered,
        rejected=rejected, workload_tradeoffs=_tradeoffs(f, current, base),
        assumptions=list(assumptions or []), questions=list(questions or []),
    )


_callable(__name__)  # infertune.advise(...) is the API verb

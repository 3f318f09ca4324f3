"""A technique `Setup` rendered for each reader: the estimator's settings (and its estimate), the
`InferenceConfig` it loads with, the Python snippet and the `transformers serve` (or other engine's) command.

One translation, used by the advisor, the tuner and the report alike, so what is advised, measured and
reported is the same configuration. The generic parts (from_pretrained kwargs, serve flags) are
`InferenceConfig`'s own; this module adds what a Setup knows beyond it (quantization presets, engines).
"""

from __future__ import annotations

import shlex
from typing import Any

from infertune.core.config import InferenceConfig, serve_flags
from infertune.estimate import Estimate, estimate
from infertune.estimate.memory import EstimateSettings, Quantization
from infertune.estimate.placement import parse_max_memory
from infertune.techniques import Facts, Setup
from infertune.techniques.factors import package_version
from infertune.techniques.quantization import estimator_quant
from infertune.techniques.serving import engine_command
from infertune.techniques.versions import experts_fused

QUANT_CONFIGS: dict[str, dict[str, Any]] = {  # from_pretrained(quantization_config=...) accepts these dicts
    "bnb-8bit": {"quant_method": "bitsandbytes", "load_in_8bit": True},
    "bnb-4bit": {
        "quant_method": "bitsandbytes",
        "load_in_4bit": True,
        "bnb_4bit_quant_type": "nf4",
        "bnb_4bit_use_double_quant": True,
        "bnb_4bit_compute_dtype": "bfloat16",
    },
    "torchao-int4": {
        "quant_method": "torchao",
        "quant_type": "int4_weight_only",
        "quant_type_kwargs": {"group_size": 128},
    },
    "torchao-int8": {"quant_method": "torchao", "quant_type": "int8_weight_only"},
    "quanto-int8": {"quant_method": "quanto", "weights": "int8"},
}


def settings_for(f: Facts, s: Setup, **update: Any) -> EstimateSettings:
    """How the estimator sees a setup: serial batching holds one call's sequences at a time; static batching
    pads all concurrent requests into one call; continuous batching holds them all with a chunked prefill."""
    b, c = f.batch, f.concurrency
    batch, conc, chunk = {
        "serial": (b, 1, None),
        "static": (b * c, 1, None),
        "continuous": (1, b * c, s.max_batch_tokens),
    }[s.batching]
    attn = "eager" if s.attn in ("eager", "paged|eager") else s.attn
    return EstimateSettings(
        dtype=s.dtype,
        quantization=Quantization.parse(estimator_quant(f, s)),
        kv_cache=s.kv_cache,
        attn=attn,
        prefill_chunk=chunk,
        paged_kv=s.batching == "continuous",  # transformers' continuous batching and the engines page the cache
        input_len=f.input_len,
        max_new_tokens=f.max_new_tokens,
        batch=batch,
        # pipeline stages split the layers like tensor parallel splits each layer: per GPU, 1/(tp x pp) of them
        concurrency=conc,
        platform=f.platform,
        tp=s.tp * s.pp,
        compile=s.compile
        or (s.kv_cache == "static" and f.platform == "cuda"),  # generate compiles a static cache on CUDA
        experts_fused=experts_fused(f),  # the target's transformers decides what a quantization covers
        transformers_version=_version(package_version(f, s, "transformers")),  # its slow paths, priced
    ).model_copy(update=update)


def _version(v: tuple[int, ...] | None) -> str | None:
    return ".".join(map(str, v)) if v else None


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
    if s.checkpoint == "safetensors":
        load["use_safetensors"] = True
    if s.low_cpu_mem_usage:
        load["low_cpu_mem_usage"] = True
    cache = None if s.kv_cache == "dynamic" else s.kv_cache
    return InferenceConfig(
        dtype=s.dtype,
        attn_implementation=s.attn,
        cache_implementation=cache,
        batching=s.batching,
        max_batch_tokens=s.max_batch_tokens,
        cb_block_size=s.cb_block_size,
        cb_num_blocks=s.cb_num_blocks,
        cache_config={"backend": "quanto", "nbits": 4} if s.kv_cache == "quantized" else None,
        device_map=s.device_map,
        max_memory=s.max_memory,
        load_kwargs=load,
        tp_size=s.tp if s.engine == "transformers" else 1,  # another engine's parallelism is in its command
    )


def serve_flags_for(s: Setup) -> list[str]:
    """The `transformers serve` flags of a setup (the KV-cache kind and static batching have none)."""
    return serve_flags(
        dtype=s.dtype,
        attn=s.attn,
        compile=s.compile,
        quantization=s.quantization if s.quantization in ("bnb-4bit", "bnb-8bit") else None,
        continuous_batching=s.batching == "continuous",
        max_batch_tokens=s.max_batch_tokens,
        block_size=s.cb_block_size,
        num_blocks=s.cb_num_blocks,
    )


def serve_command(f: Facts, s: Setup) -> str:
    if s.engine != "transformers":
        return engine_command(f.model, s, f.input_len + f.max_new_tokens, max(f.concurrency * f.batch, 1))
    return shlex.join(["transformers", "serve", "--host", "127.0.0.1", *serve_flags_for(s)])


def python_snippet(f: Facts, s: Setup) -> str:
    cfg = config_for(s, f.accelerator.bf16)
    code = cfg.python_snippet(f.model, f.max_new_tokens, tp=s.tp)
    if s.batching == "continuous":
        load = code.split("messages =")[0]
        code = (
            load.replace(
                "from transformers import AutoModelForCausalLM, AutoTokenizer",
                "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
                "from transformers.generation import ContinuousBatchingConfig, GenerationConfig",
            )
            + "prompts = [[{'role': 'user', 'content': 'Hello!'}], [{'role': 'user', 'content': 'Hi there'}]]\n"
            "inputs = [tok.apply_chat_template(p, add_generation_prompt=True) for p in prompts]\n"
            f"gen = GenerationConfig(max_new_tokens={f.max_new_tokens}, do_sample=False, "
            "eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)\n"
            f"cb = ContinuousBatchingConfig(max_batch_tokens={s.max_batch_tokens}, num_blocks={s.cb_num_blocks}, "
            f"page_size={s.cb_block_size or 256})  # page_size: block_size before transformers 5.17\n"
            "outputs = model.generate_batch(inputs=inputs, generation_config=gen, continuous_batching_config=cb)\n"
            "for rid, o in outputs.items():\n    print(rid, tok.decode(o.generated_tokens, skip_special_tokens=True))\n"
        )
    if s.engine != "transformers":
        code = f"# serve with {s.engine} instead of transformers:\n# {serve_command(f, s)}\n" + code
    if s.checkpoint == "safetensors":
        code = (
            "# safetensors: a revision that ships them, or convert the .bin shards once where RAM allows:\n"
            f"# AutoModelForCausalLM.from_pretrained({f.model!r}).save_pretrained(DIR, safe_serialization=True)\n"
            + code
        )
    return code


MEASURE_FLAGS = {"dtype", "attn", "kv_cache"}  # what `infertune measure` takes as flags


def validation(f: Facts, s: Setup) -> tuple[str, str | None]:
    """The infertune command that measures this setup on the workload (and a run file when flags are not enough)."""
    shape = f"--model {f.model} --input-len {f.input_len} --max-new-tokens {f.max_new_tokens} --batch {f.batch}"
    if s.engine != "transformers":
        return (
            f"{serve_command(f, s)}  # then: infertune loadtest --url http://127.0.0.1:8000 "
            f"--concurrency {f.concurrency}"
        ), None
    if f.concurrency > 1:
        shape += f" --concurrency {f.concurrency} --batching {s.batching}"
        for flag, v in (
            ("--max-batch-tokens", s.max_batch_tokens),
            ("--cb-block-size", s.cb_block_size),
            ("--cb-num-blocks", s.cb_num_blocks),
        ):
            if v:
                shape += f" {flag} {v}"
    changed = set(Setup().changes(s)) - {"batching", "max_batch_tokens", "cb_block_size", "cb_num_blocks"}
    if changed <= MEASURE_FLAGS | {"compile"} and s.kv_cache != "quantized":
        attn = shlex.quote(s.attn)
        flags = f" --dtype {s.dtype} --attn {attn}" + (f" --kv-cache {s.kv_cache}" if s.kv_cache != "dynamic" else "")
        return f"infertune measure {shape}{flags}", None
    import yaml

    cfg = config_for(s, f.accelerator.bf16).model_dump(exclude_defaults=True)
    run = {
        "model": f.model,
        "input_len": f.input_len,
        "max_new_tokens": f.max_new_tokens,
        "batch": f.batch,
        "config": cfg,
    }
    if f.concurrency > 1:
        run["concurrency"] = f.concurrency
    return "infertune measure --workload infertune-run.yaml", yaml.safe_dump(run, sort_keys=False)

"""InferenceConfig: every knob of one way to run a model, and its translations.

The same object becomes `from_pretrained` kwargs, `generate` kwargs, a ready-to-run Python snippet and
`transformers serve` flags, so what infertune measured is exactly what it hands the user.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

from infertune.core.errors import UserError, validated

DTYPES = ("auto", "float32", "bfloat16", "float16")
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16", "float": "float32"}

# Names transformers 5.x registers (AttentionInterface) plus the paged variants; anything of the form
# `org/repo` (optionally `org/repo:function`) is a kernel from the Hub, loaded by the `kernels` package.
ATTN_IMPLEMENTATIONS = (
    "eager",
    "sdpa",
    "flash_attention_2",
    "flash_attention_3",
    "flash_attention_4",
    "flex_attention",
    "paged|sdpa",
    "paged|eager",
    "paged|flash_attention_2",
    "paged|flash_attention_3",
)
_HUB_KERNEL = re.compile(r"^[\w.-]+/[\w.-]+(@[\w.-]+)?(:[\w.]+)?$")

CACHE_IMPLEMENTATIONS = (
    "dynamic",
    "static",
    "offloaded",
    "offloaded_static",
    "sliding_window",
    "hybrid",
    "hybrid_chunked",
    "offloaded_hybrid",
    "offloaded_hybrid_chunked",
    "quantized",
)


def attn_problem(name: str) -> str:
    import difflib

    close = difflib.get_close_matches(name, ATTN_IMPLEMENTATIONS, n=1, cutoff=0.5)
    return (
        f"unknown attention implementation {name!r}; use one of {', '.join(ATTN_IMPLEMENTATIONS)} or a Hub "
        "kernel such as kernels-community/flash-attn2" + (f"; nearest valid: {close[0]}" if close else "")
    )


def check_attn(name: str | None, flag: str = "--attn") -> str | None:
    """An attention implementation transformers knows (or a Hub kernel); else one UserError line."""
    if name is None or name in ATTN_IMPLEMENTATIONS or _HUB_KERNEL.match(name):
        return name
    raise UserError(f"{flag}: {attn_problem(name)}")


class InferenceConfig(BaseModel):
    """One inference configuration. `None` means "the library's default", which is what users start from."""

    model_config = ConfigDict(extra="forbid")

    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="weights/compute dtype; 'auto' keeps the checkpoint's dtype"
    )
    attn_implementation: str | None = Field(None, description="attention backend; None: transformers' default")
    device: str | None = Field(None, description="'cpu', 'cuda', 'cuda:N' or 'mps'; None: cuda if present, else cpu")
    device_map: str | dict[str, Any] | None = Field(None, description="accelerate device_map, e.g. 'auto'")
    max_memory: dict[str, str] | None = Field(None, description="per-device budget for device_map, e.g. {'0': '20GiB'}")
    cache_implementation: str | None = Field(None, description="KV cache kind for generate")
    cache_config: dict[str, Any] | None = Field(None, description="options of the cache (e.g. nbits for 'quantized')")
    batching: Literal["serial", "static", "continuous"] = Field(
        "serial", description="concurrent requests: one generate each, one padded batch, or generate_batch"
    )
    max_batch_tokens: PositiveInt | None = Field(None, description="continuous batching: tokens per forward pass")
    cb_block_size: PositiveInt | None = Field(
        None, description="continuous batching: tokens per KV-cache block (page_size since transformers 5.17)"
    )
    cb_num_blocks: PositiveInt | None = Field(
        None, description="continuous batching: KV-cache blocks; None: sized from free memory"
    )
    tp_size: PositiveInt = Field(1, description="tensor-parallel ranks (torchrun, one process per rank)")
    tp_plan: Literal["auto", "mlp"] | dict[str, str] = Field(
        "auto",
        description="'auto': the model's own plan; 'mlp': only the MLP split, attention replicated (resolved "
        "to a dict for the model before loading); a dict overrides the plan's rules "
        "(DistributedConfig tp_plan)",
    )
    trust_remote_code: bool = Field(False, description="run code shipped with the model; only when asked for")
    load_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="other from_pretrained kwargs, passed through"
    )
    generate_kwargs: dict[str, Any] = Field(default_factory=dict, description="other generate kwargs, passed through")

    @field_validator("dtype", mode="before")
    @classmethod
    def _dtype_alias(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip().lower().removeprefix("torch.")
            return DTYPE_ALIASES.get(v, v)
        return v

    @field_validator("attn_implementation")
    @classmethod
    def _known_attn(cls, v: str | None) -> str | None:
        if v is None or v in ATTN_IMPLEMENTATIONS or _HUB_KERNEL.match(v):
            return v
        raise ValueError(attn_problem(v))

    @field_validator("device")
    @classmethod
    def _device_form(cls, v: str | None) -> str | None:
        if v is None or re.fullmatch(r"cpu|mps|cuda(:\d+)?", v):
            return v
        raise ValueError(f"unknown device {v!r}; use cpu, cuda, cuda:N or mps")

    @field_validator("cache_implementation")
    @classmethod
    def _known_cache(cls, v: str | None) -> str | None:
        if v is None or v in CACHE_IMPLEMENTATIONS:
            return v
        raise ValueError(f"unknown cache implementation {v!r}; use one of {', '.join(CACHE_IMPLEMENTATIONS)}")

    @model_validator(mode="after")
    def _consistent(self) -> InferenceConfig:
        given = [k for k in ("max_batch_tokens", "cb_block_size", "cb_num_blocks") if getattr(self, k) is not None]
        if given and self.batching != "continuous":
            raise ValueError(f"{', '.join(given)} only apply with batching 'continuous'")
        if self.max_memory is not None and self.device_map is None:
            raise ValueError("max_memory budgets a device_map: give device_map too (e.g. --device-map auto)")
        if self.tp_size > 1 and (self.device_map is not None or self.batching == "continuous"):
            raise ValueError("tp_size > 1 places the weights itself: not with device_map or continuous batching")
        if self.tp_plan != "auto" and self.tp_size == 1:
            raise ValueError("tp_plan applies to tensor parallelism: give tp_size > 1 too")
        return self

    # --- translations -------------------------------------------------------------------------------

    def from_pretrained_kwargs(self, device: str) -> dict[str, Any]:
        """kwargs for `AutoModelForCausalLM.from_pretrained`; `device` is the resolved target device."""
        kw = self._literal_load_kwargs(device)
        if self.tp_size > 1:  # each rank loads its shard onto its own device
            from transformers import DistributedConfig

            if self.tp_plan == "mlp":  # a name of ours: measure.parallel.resolved_plan turns it into the model's rules
                raise ValueError("tp_plan 'mlp' is resolved to the model's own plan keys before loading")
            kw["distributed_config"] = DistributedConfig(tp_size=self.tp_size, tp_plan=self.tp_plan)
        return kw

    def _literal_load_kwargs(self, device: str) -> dict[str, Any]:
        """The from_pretrained kwargs that are plain values (a snippet prints them as literals)."""
        kw: dict[str, Any] = {"dtype": self.dtype}
        if self.attn_implementation is not None:
            kw["attn_implementation"] = self.attn_implementation
        if self.tp_size == 1:  # tensor parallel places the weights itself: no device_map
            kw["device_map"] = self.device_map if self.device_map is not None else device
        if self.max_memory is not None:
            kw["max_memory"] = {
                (int(k) if str(k).isdigit() else k): int(v) if str(v).isdigit() else v
                for k, v in self.max_memory.items()
            }  # accelerate reads plain bytes as int only
        if self.trust_remote_code:
            kw["trust_remote_code"] = True
        kw.update(self.load_kwargs)
        return kw

    def generation_kwargs(self) -> dict[str, Any]:
        """kwargs this configuration adds to `generate` (the workload adds max_new_tokens and sampling)."""
        kw: dict[str, Any] = {}
        if self.cache_implementation is not None:
            kw["cache_implementation"] = self.cache_implementation
        if self.cache_config is not None:
            kw["cache_config"] = dict(self.cache_config)
        kw.update(self.generate_kwargs)
        return kw

    def python_snippet(
        self,
        model: str,
        max_new_tokens: int = 256,
        prompt: str | list[dict[str, str]] | None = None,
        seed: int | None = None,
        generate: dict[str, Any] | None = None,
        tp: int = 1,
    ) -> str:
        """A short, runnable script that loads and generates with exactly this configuration: `prompt` (raw
        text, or chat messages through the template; default a greeting), `seed` set first, `generate`
        kwargs (sampling, min_new_tokens) added, and the torchrun launch line for `tp` > 1 ranks."""
        tp = max(tp, self.tp_size)
        load = self._literal_load_kwargs("auto")
        if self.device is not None and self.device_map is None and tp == 1:
            load["device_map"] = self.device
        if tp > 1:
            load.pop("device_map", None)
        gen = {"max_new_tokens": max_new_tokens, **(generate or {}), **self.generation_kwargs()}
        load_args = "".join(f"\n    {k}={v!r}," for k, v in load.items())
        if tp > 1:
            load_args += f"\n    distributed_config=DistributedConfig(tp_size={tp}, tp_plan={self.tp_plan!r}),"
        gen_args = "".join(f"\n    {k}={v!r}," for k, v in gen.items())
        if isinstance(prompt, str):
            encode = f"inputs = tok({prompt!r}, return_tensors='pt').to(model.device)\n"
        else:
            messages = prompt if prompt is not None else [{"role": "user", "content": "Hello!"}]
            encode = (
                f"messages = {messages!r}\n"
                "inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors='pt', "
                "return_dict=True).to(model.device)\n"
            )
        return (
            (f"# launch: torchrun --nproc-per-node {tp} this_script.py\n" if tp > 1 else "")
            + ("import torch\n" if seed is not None else "")
            + (
                f"from transformers import AutoModelForCausalLM, AutoTokenizer{', DistributedConfig' if tp > 1 else ''}"
                "\n\n"
            )
            + (f"torch.manual_seed({seed})\n" if seed is not None else "")
            + f"tok = AutoTokenizer.from_pretrained({model!r})\n"
            f"model = AutoModelForCausalLM.from_pretrained(\n    {model!r},{load_args}\n)\n"
            + encode
            + f"out = model.generate(**inputs,{gen_args}\n)\n"
            "print(tok.decode(out[0, inputs['input_ids'].shape[1]:], skip_special_tokens=True))\n"
        )

    def serve_flags(self) -> list[str]:
        """The `transformers serve` flags that express this configuration (those serve has)."""
        return serve_flags(
            dtype=self.dtype,
            attn=self.attn_implementation,
            device=self.device,
            continuous_batching=self.batching == "continuous",
            max_batch_tokens=self.max_batch_tokens,
            block_size=self.cb_block_size,
            num_blocks=self.cb_num_blocks,
            trust_remote_code=self.trust_remote_code,
        )

    def label(self) -> str:
        """A short human label: only what differs from the library defaults."""
        shown = {
            "dtype": self.dtype if self.dtype != "auto" else None,
            "attn": self.attn_implementation,
            "device": self.device,
            "device_map": self.device_map,
            "cache": self.cache_implementation,
            "batching": self.batching if self.batching != "serial" else None,
            "tp": self.tp_size if self.tp_size > 1 else None,
            "tp_plan": None
            if self.tp_plan == "auto"
            else "mlp"
            if self.tp_plan == "mlp" or set(self.tp_plan.values()) == {"replicate"}
            else "custom",
        }
        return ", ".join(f"{k}={v}" for k, v in shown.items() if v is not None) or "defaults"


def config_from(data: dict[str, Any], source: str = "config", **overrides: Any) -> InferenceConfig:
    """InferenceConfig from file fields, then CLI flags on top (flags given as None are left out)."""
    return validated(InferenceConfig, data, source, overrides)


def serve_flags(
    *,
    dtype: str | None = None,
    attn: str | None = None,
    quantization: str | None = None,
    compile: bool = False,
    continuous_batching: bool = False,
    max_batch_tokens: int | None = None,
    block_size: int | None = None,
    num_blocks: int | None = None,
    device: str | None = None,
    trust_remote_code: bool = False,
) -> list[str]:
    """`transformers serve` flags: the one translation behind the advice, the report and serve-trial."""
    flags: list[str] = []
    if dtype and dtype != "auto":
        flags += ["--dtype", dtype]
    if attn:  # serve picks the paged variant itself under --continuous-batching
        flags += ["--attn-implementation", attn.removeprefix("paged|")]
    if device:
        flags += ["--device", device]
    if quantization:
        flags += ["--quantization", quantization]
    if compile:
        flags.append("--compile")
    if continuous_batching:
        flags.append("--continuous-batching")
        for name, v in (
            ("--cb-max-batch-tokens", max_batch_tokens),
            ("--cb-block-size", block_size),
            ("--cb-num-blocks", num_blocks),
        ):
            if v is not None:
                flags += [name, str(v)]
    if trust_remote_code:
        flags.append("--trust-remote-code")
    return flags


def vllm_flags(
    *,
    dtype: str | None,
    max_model_len: int,
    max_num_seqs: int,
    quantization: str | None = None,
    tp: int = 1,
    pp: int = 1,
    kv_cache_dtype: str | None = None,
) -> list[str]:
    """vLLM server flags (model, host and port come separately): the one translation behind the advice, the
    report and serve-trial --engine vllm. fp32 becomes bf16 (vLLM serves 16-bit)."""
    flags = [
        "--dtype",
        "bfloat16" if dtype == "float32" else dtype or "auto",
        "--max-model-len",
        str(max_model_len),
        "--max-num-seqs",
        str(max_num_seqs),
    ]
    if tp > 1:
        flags += ["--tensor-parallel-size", str(tp)]
    if pp > 1:  # stages on separate machines: vLLM runs them over a Ray cluster
        flags += ["--pipeline-parallel-size", str(pp), "--distributed-executor-backend", "ray"]
    if quantization in ("awq", "gptq", "fp8"):
        flags += ["--quantization", quantization]
    elif quantization and quantization.startswith("bnb"):
        flags += ["--quantization", "bitsandbytes"]
    if kv_cache_dtype:
        flags += ["--kv-cache-dtype", kv_cache_dtype]
    return flags

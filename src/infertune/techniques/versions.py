"""Feature -> the first library version that has it, one row per feature with its public source.

Every compatibility check that needs a feature of transformers, accelerate, bitsandbytes or torch reads the
target's version through this table (`need`): the version the user stated (--lib NAME=VERSION) first, this
host's only when the target is this host (`Facts.installed`). A version below the row's blocks the move; an
unknown one (another machine, nothing stated) is an open question, never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from infertune.techniques.base import Check, Facts, parse_version

REL = "https://github.com/huggingface/transformers/releases/tag/"


@dataclass(frozen=True)
class Feature:
    id: str
    package: str
    first: str  # the first release with the feature
    what: str
    source: str
    # a target below `first` gets the move with the upgrade (a flag on the move, not a rejection): a drop-in
    # feature of a newer release. False: a new API the user's code must adopt (tensor parallel, continuous
    # batching): the move is rejected until they upgrade.
    upgrade: bool = False

    @property
    def version(self) -> tuple[int, ...]:
        return parse_version(self.first)


FEATURES: tuple[Feature, ...] = (
    Feature(
        "sdpa-attention",
        "transformers",
        "4.36.0",
        'attn_implementation="sdpa" (torch scaled_dot_product_attention in the models)',
        REL + "v4.36.0",
        upgrade=True,
    ),
    Feature(
        "flash-attention-2",
        "transformers",
        "4.36.0",
        'attn_implementation="flash_attention_2" (4.34 had use_flash_attention_2=True; the '
        "attn_implementation argument came with 4.36)",
        REL + "v4.36.0",
        upgrade=True,
    ),
    Feature(
        "static-cache-compile",
        "transformers",
        "4.38.0",
        'a static KV cache (cache_implementation="static") that torch.compile can capture',
        REL + "v4.38.0",
        upgrade=True,
    ),
    Feature(
        "quantized-kv-cache",
        "transformers",
        "4.42.0",
        'a quantized KV cache (cache_implementation="quantized", quanto or HQQ backends)',
        REL + "v4.42.0",
        upgrade=True,
    ),
    Feature(
        "tensor-parallel-plan",
        "transformers",
        "4.47.0",
        'tensor parallelism from the model\'s own plan (from_pretrained(tp_plan="auto") under torchrun)',
        "https://github.com/huggingface/transformers/pull/34184",
    ),
    Feature(
        "continuous-batching",
        "transformers",
        "4.56.0",
        "continuous batching in transformers (generate_batch, transformers serve --continuous-batching)",
        "https://huggingface.co/docs/transformers/main/en/continuous_batching",
    ),
    Feature(
        "bnb-4bit",
        "transformers",
        "4.30.0",
        "load_in_4bit / BitsAndBytesConfig 4-bit (NF4, FP4) loading",
        "https://huggingface.co/blog/4bit-transformers-bitsandbytes",
        upgrade=True,
    ),
    Feature(
        "grouped-experts",
        "transformers",
        "5.0.0",
        "MoE experts as stacked tensors run by batched/grouped matmuls (experts_implementation), instead of "
        "a Python loop over per-expert nn.Linear modules",
        "https://github.com/huggingface/transformers/pull/42697",
    ),
    Feature(
        "bnb-4bit-kernels",
        "bitsandbytes",
        "0.39.0",
        "4-bit (NF4/FP4) weights in bitsandbytes",
        "https://huggingface.co/blog/4bit-transformers-bitsandbytes",
        upgrade=True,
    ),
    Feature(
        "bnb-4bit-fast-inference",
        "bitsandbytes",
        "0.40.0",
        "fast batch-1 4-bit inference kernels",
        "https://github.com/TimDettmers/bitsandbytes/releases/tag/0.40.0",
    ),
    Feature(
        "torch-sdpa",
        "torch",
        "2.0.0",
        "torch.nn.functional.scaled_dot_product_attention and torch.compile",
        "https://pytorch.org/blog/pytorch-2.0-release/",
    ),
    Feature(
        "torch-compile-static-cache",
        "torch",
        "2.3.0",
        "torch.compile of generate's static cache without graph breaks",
        "https://huggingface.co/docs/transformers/main/en/llm_optims#static-kv-cache-and-torchcompile",
    ),
    Feature(
        "flex-attention",
        "torch",
        "2.5.0",
        "torch.nn.attention.flex_attention",
        "https://pytorch.org/blog/flexattention/",
    ),
)
BY_ID = {x.id: x for x in FEATURES}


def has(f: Facts, feature: str) -> bool | None:
    """Whether the target's version has the feature: True/False, or None when its version is unknown (another
    machine with nothing stated, or the package not installed)."""
    x = BY_ID[feature]
    if not f.known(x.package):
        return None
    v = f.version(x.package)
    return None if v is None else v >= x.version


def need(c: Check, f: Facts, feature: str) -> Check:
    """The target's known version is older than the feature's first release: the move carries the upgrade (an
    open item naming it, and `c.requires`) where a drop-in upgrade brings the feature, else a blocker naming the
    feature and the version that brought it. Nothing when the version is unknown (the technique's own question)."""
    x = BY_ID[feature]
    if has(f, feature) is not False:
        return c
    if x.upgrade:
        c.issues.append(
            f"{x.what} needs {x.package} >= {x.first} ({x.source}); the target has {f.installed(x.package)}: "
            f"the move includes the upgrade (pip install '{x.package}>={x.first}')"
        )
        known = c.requires.get(x.package)
        if known is None or parse_version(known) < x.version:
            c.requires[x.package] = f">={x.first}"
    else:
        c.blockers.append(
            f"{x.what} needs {x.package} >= {x.first} ({x.source}); the target has {f.installed(x.package)}"
        )
    return c


def lacks(f: Facts, feature: str) -> bool:
    """The target's version is known and older than the feature's first release."""
    return has(f, feature) is False


# MoE architectures whose experts were per-expert nn.Linear modules in transformers 4.x and became stacked 3D
# tensors in 5.0 (https://github.com/huggingface/transformers/pull/41580): bitsandbytes and torchao quantize the
# former, not the latter. Architectures that stacked their experts already in 4.x (gpt-oss, Llama 4, DBRX,
# GraniteMoE) are not listed: their structure does not depend on the version.
LINEAR_EXPERTS_BEFORE_5 = (
    "mixtral",
    "qwen2_moe",
    "qwen3_moe",
    "deepseek_v2",
    "deepseek_v3",
    "olmoe",
    "phimoe",
    "jamba",
    "minimax",
    "glm4_moe",
    "ernie4_5_moe",
    "hunyuan_v1_moe",
    "dots1",
)


def experts_fused(f: Facts) -> bool | None:
    """Whether the target's transformers builds this model's routed experts as stacked tensors: read from the
    target's version for the architectures whose layout changed with 5.0; None: as probed on this host."""
    p = f.profile
    if not p.num_experts or p.model_type not in LINEAR_EXPERTS_BEFORE_5:
        return None
    v = f.version("transformers") if f.known("transformers") else None
    return None if v is None else v >= BY_ID["grouped-experts"].version

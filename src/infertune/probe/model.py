"""A model's shape from its config.json, without loading weights.

The first time a config is seen, transformers reads it (AutoConfig), the model is instantiated on the
meta device for an exact parameter count (tied embeddings once, towers included) and probe/arch.py reads
the architecture's cache layout and experts. The result is cached as JSON under INFERTUNE_HOME/profiles,
keyed by the config's bytes, the installed transformers version (read from the package metadata, never
by importing it) and PROFILE_VERSION: later calls read that file and import neither torch nor
transformers. Safetensors headers are the fallback count (for quantized checkpoints those count packed
bytes, not parameters, so they are labelled as such).
The checkpoint as stored (bytes, elements per dtype) comes from the safetensors headers: the folder's own
files, or those infertune.models.hub read from the Hub by range request for a model fetched without its weights.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, computed_field

from infertune.core.errors import UserError
from infertune.probe.arch import CacheGroup

PROFILE_VERSION = "5"  # bump when the facts a profile holds change: older cached profiles are ignored


class ModelProfile(BaseModel):
    path: str
    model_type: str
    architecture: str | None
    num_layers: int
    hidden_size: int
    intermediate_size: int | None
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None  # the context length: positions of the text stack (any spelling)
    sliding_window: int | None
    layer_types: list[str]
    native_dtype: str | None
    quantization: dict | None
    num_parameters: int | None
    parameter_count_source: Literal["meta-device", "safetensors-header"] | None
    # embedding / lm_head / experts / linear / other (see probe/count.py)
    param_groups: dict[str, int] | None = None
    linear_rows: int | None = None  # sum of out_features over Linear layers: per-row quantization scales
    expert_rows: int = 0  # the same over the routed experts
    checkpoint_format: Literal["safetensors", "pytorch", "gguf"] | None
    checkpoint_bytes: int  # safetensors: the tensors' bytes as stored (from the headers); else the files' sizes
    checkpoint_dtypes: dict[str, int] | None = None  # safetensors: elements per stored dtype (BF16, F32, I32, ...)
    # The model class's own support flags (sdpa, flash_attn, flex_attn, compile, tp_plan); empty: unknown
    # (an architecture transformers does not ship, e.g. remote code).
    supports: dict[str, bool] = {}
    # The text stack's cache by layer kind (probe/arch.py); empty: derived from the fields above.
    cache: list[CacheGroup] = []
    kv_lora_rank: int | None = None  # multi-head latent attention: the cached latent ...
    qk_rope_head_dim: int | None = None  # ... and the rope key beside it
    num_experts: int | None = None  # routed experts per MoE layer
    experts_per_token: int | None = None  # top-k
    shared_experts: int = 0
    experts_fused: bool = False  # 3D expert tensors (bnb leaves them unquantized) rather than Linear layers
    tower_parameters: int = 0  # vision/audio tower or encoder: held in memory, not read by a decode step
    is_encoder_decoder: bool = False
    cross_layers: int = 0  # decoder layers attending to the encoder
    cross_kv_per_token: int = 0  # their K + V elements per encoder token
    encoder_length: int | None = None  # fixed encoder length (Whisper: 1500 audio frames); None: the input

    @property
    def linear_params(self) -> int:
        """Linear weights inside the blocks (what quantization touches); without groups, all but the embedding."""
        if self.param_groups:
            return self.param_groups.get("linear", 0)
        return (self.num_parameters or 0) - self.vocab_size * self.hidden_size

    @property
    def expert_params(self) -> int:
        return (self.param_groups or {}).get("experts", 0)

    def expert_fraction(self, tokens: int = 1) -> float:
        """Share of the routed experts that `tokens` independent tokens activate on average:
        1 - (1 - k/E)^tokens (each token picks k of E)."""
        if not self.num_experts:
            return 1.0
        k = min(self.experts_per_token or 1, self.num_experts)
        return 1 - (1 - k / self.num_experts) ** max(tokens, 1)

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy rejects any decorated property
    @property
    def active_parameters(self) -> int:
        """Parameters one token computes with: all but the routed experts it does not pick."""
        return int((self.num_parameters or 0) - self.expert_params * (1 - self.expert_fraction(1)))

    @property
    def cache_groups(self) -> list[CacheGroup]:
        if self.cache:
            return self.cache
        per_token = 2 * self.num_kv_heads * self.head_dim  # legacy profiles: every layer K and V heads
        groups = [CacheGroup(kind="full", layers=self.num_global_layers, kv_per_token=per_token)]
        if self.num_sliding_layers:
            groups.append(
                CacheGroup(
                    kind="sliding",
                    layers=self.num_sliding_layers,
                    kv_per_token=per_token,
                    window=(self.sliding_window or 1) - 1,
                )
            )
        return groups

    @property
    def num_sliding_layers(self) -> int:
        return sum(t in ("sliding_attention", "chunked_attention") for t in self.layer_types)

    @property
    def num_global_layers(self) -> int:
        return sum(t == "full_attention" for t in self.layer_types) if self.layer_types else self.num_layers

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented form; mypy rejects any decorated property
    @property
    def layer_mix(self) -> dict[str, int]:
        """Layers by cache kind: full, sliding, chunked, linear (fixed state), hybrid, none."""
        mix: dict[str, int] = {}
        for g in self.cache_groups:
            mix[g.kind] = mix.get(g.kind, 0) + g.layers
        return mix


def read_config(path: Path) -> bytes:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise UserError(f"{path} has no config.json: not a Hugging Face model folder")
    raw = cfg_file.read_bytes()
    try:
        json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{cfg_file} is not valid JSON: {e}") from None
    return raw


def load_config(path: str | Path, trust_remote_code: bool = False):
    """`AutoConfig` for a local model folder, with one-line errors for the usual breakages."""
    from transformers import AutoConfig

    path = Path(path)
    read_config(path)
    try:
        return AutoConfig.from_pretrained(path, trust_remote_code=trust_remote_code)
    except ValueError as e:
        msg = str(e).splitlines()[0]
        if "trust_remote_code" in str(e) and not trust_remote_code:
            msg = "the model needs its own code; pass --trust-remote-code if you trust it"
        raise UserError(f"cannot read the config in {path}: {msg}") from None


def config_from_dict(data: dict, trust_remote_code: bool = False):
    """A transformers config object from a config.json's contents (for a config read from elsewhere)."""
    from transformers import AutoConfig

    data = dict(data)
    model_type = data.pop("model_type", None)
    try:
        return AutoConfig.for_model(model_type, **data)
    except ValueError as e:
        raise UserError(f"cannot read the config: {str(e).splitlines()[0]}") from None


def _checkpoint(path: Path) -> tuple[str | None, int, dict[str, int] | None]:
    """(format, bytes, elements per stored dtype). Safetensors from the headers: the folder's own files, or
    those infertune.models.hub read for a hub model fetched without its weights; the bytes are the tensors' data."""
    from infertune.models.hub import safetensors_metadata

    st = safetensors_metadata(path)
    if st is not None:
        return (
            "safetensors",
            sum(max((t.data_offsets[1] for t in f.tensors.values()), default=0) for f in st.files_metadata.values()),
            dict(st.parameter_count),
        )
    for fmt, pattern in (("safetensors", "*.safetensors"), ("pytorch", "*.bin"), ("gguf", "*.gguf")):
        files = sorted(path.glob(pattern))
        if files:
            return fmt, sum(f.stat().st_size for f in files), None
    return None, 0, None


def _count_safetensors(path: Path) -> int | None:
    from infertune.models.hub import safetensors_metadata

    st = safetensors_metadata(path)
    return sum(st.parameter_count.values()) if st is not None else None


ST_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32"}


def _main_float(stored: dict[str, int] | None) -> str | None:
    """The checkpoint's main float dtype, for a config that names none."""
    floats = {ST_DTYPES[d]: n for d, n in (stored or {}).items() if d in ST_DTYPES}
    return max(floats, key=lambda d: floats[d]) if floats else None


def _cache_file(raw: bytes, trust_remote_code: bool) -> Path | None:
    from importlib.metadata import PackageNotFoundError, version

    from infertune.core.paths import home

    try:
        tf = version("transformers")
    except PackageNotFoundError:
        return None
    key = hashlib.sha256(raw + f"\0{tf}\0{PROFILE_VERSION}\0{int(trust_remote_code)}".encode()).hexdigest()
    return home() / "profiles" / f"{key[:32]}.json"


# facts of the folder, not of the config, and what the profile computes from the rest
CACHED_OUT = ("path", "checkpoint_format", "checkpoint_bytes", "checkpoint_dtypes", "active_parameters", "layer_mix")


def profile_model(model: str | Path | dict, trust_remote_code: bool = False) -> ModelProfile:
    """The profile of a model folder (or of a config.json's contents), from the cache when seen before."""
    if isinstance(model, dict):
        raw, path, fmt, nbytes, stored = json.dumps(model, sort_keys=True).encode(), None, None, 0, None
    else:
        path = Path(model)
        raw = read_config(path)
        fmt, nbytes, stored = _checkpoint(path)
    here: dict[str, Any] = {
        "path": str(path) if path else "-",
        "checkpoint_format": fmt,
        "checkpoint_bytes": nbytes,
        "checkpoint_dtypes": stored,
    }
    cache = _cache_file(raw, trust_remote_code)
    if cache is not None and cache.is_file():
        try:
            return ModelProfile(**{**json.loads(cache.read_text(encoding="utf-8")), **here})
        except (ValueError, TypeError):
            pass  # an unreadable or older entry: profile afresh
    if isinstance(model, dict):
        cfg = config_from_dict(model, trust_remote_code)
    else:
        cfg = load_config(Path(model), trust_remote_code)
    from infertune.probe.facts import facts_of  # torch and transformers: the first sight only

    fields = facts_of(cfg, trust_remote_code)
    if fields["num_parameters"] is None and path is not None:
        fields["num_parameters"] = _count_safetensors(path)
        fields["parameter_count_source"] = "safetensors-header" if fields["num_parameters"] is not None else None
    if fields.get("native_dtype") is None and stored:
        fields["native_dtype"] = _main_float(stored)  # no dtype in the config: the stored floats say it
    profile = ModelProfile(**fields, **here)
    if cache is not None and profile.parameter_count_source == "meta-device":
        from infertune.core.paths import write_json_atomic

        with contextlib.suppress(OSError):  # a read-only home: answer anyway, slower next time
            write_json_atomic(cache, profile.model_dump(mode="json", exclude=set(CACHED_OUT)))
    return profile


def mlp_only_tp_plan(model_path: str, trust_remote_code: bool = False) -> dict[str, str]:
    """Overrides of the model's own tensor-parallel plan that replicate every attention projection, so
    only the MLP is split: for models whose head counts no useful size divides (SmolLM2: 9 and 3 heads).
    Keys carry the base model's prefix (model.layers.*.self_attn.q_proj), as from_pretrained matches them."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from infertune.core.errors import UserError

    cfg = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    plan = getattr(cfg, "base_model_tp_plan", None) or {}
    cls = AutoModelForCausalLM._model_mapping.get(type(cfg), None)
    prefix = getattr(cls, "base_model_prefix", "model") if cls is not None else "model"
    out = {f"{prefix}.{k}": "replicate" for k in plan if "attn" in k or "attention" in k}
    if not out:
        raise UserError(
            f"--tp-plan mlp: {type(cfg).__name__} has no attention rules in its tensor-parallel plan to replicate"
        )
    return out

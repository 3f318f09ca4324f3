import json
from types import SimpleNamespace

import pytest

from infertune.core.errors import UserError
from infertune.probe.hardware import detect_gpus, detect_hardware
from infertune.probe.model import profile_model
from infertune.probe.versions import library_versions


class FakeCuda:
    """torch.cuda's probing surface with the facts of two real cards injected."""

    def __init__(self, cards, free=None):
        self.cards, self.free = cards, free or {}

    def is_available(self):
        return bool(self.cards)

    def device_count(self):
        return len(self.cards)

    def get_device_properties(self, i):
        return self.cards[i]

    def mem_get_info(self, i):
        if i not in self.free:
            raise RuntimeError("busy")
        return self.free[i], self.cards[i].total_memory


def test_gpu_facts_from_torch():
    a100 = SimpleNamespace(name="NVIDIA A100-SXM4-80GB", total_memory=85_899_345_920, major=8, minor=0, uuid="GPU-1")
    t4 = SimpleNamespace(name="Tesla T4", total_memory=16_106_127_360, major=7, minor=5)
    gpus = detect_gpus(FakeCuda([a100, t4], free={0: 80_000_000_000}))
    assert [g.name for g in gpus] == ["NVIDIA A100-SXM4-80GB", "Tesla T4"]
    assert gpus[0].bf16 and not gpus[1].bf16  # bf16 arrives with Ampere
    assert gpus[0].compute_capability == "8.0" and gpus[1].compute_capability == "7.5"
    assert gpus[0].free_memory_bytes == 80_000_000_000 and gpus[1].free_memory_bytes is None
    assert gpus[0].uuid == "GPU-1" and gpus[1].uuid is None
    assert detect_gpus(FakeCuda([])) == []


def test_this_machine():
    hw = detect_hardware()
    assert hw.cpu_logical_cores >= 1 and hw.ram_total_bytes > 2**30
    assert hw.accelerator in ("cpu", "cuda", "mps")


def test_library_versions_read_without_importing():
    v = library_versions(("torch", "transformers", "surely-not-installed-pkg"))
    assert v["torch"] and v["transformers"] and v["surely-not-installed-pkg"] is None


def test_profile_counts_parameters_exactly_and_tied_embeddings_once(tiny_model):
    import torch
    from transformers import AutoModelForCausalLM

    p = profile_model(tiny_model)
    real = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    assert p.num_parameters == real.num_parameters()
    assert p.parameter_count_source == "meta-device"
    assert p.tie_word_embeddings
    # The embedding is shared with lm_head: counted once.
    untied = sum(t.numel() for t in real.state_dict().values())
    assert p.num_parameters == untied - real.lm_head.weight.numel()
    assert (p.num_layers, p.hidden_size, p.num_attention_heads, p.num_kv_heads, p.head_dim) == (2, 64, 4, 2, 16)
    assert p.checkpoint_format == "safetensors" and p.checkpoint_bytes > 0
    assert p.num_global_layers == 2 and p.num_sliding_layers == 0


def test_checkpoint_as_stored_from_the_safetensors_headers(tmp_path):
    """Bytes and dtypes as the headers describe them; a config without a dtype takes the checkpoint's."""
    import json
    import shutil

    from safetensors.torch import load_file

    from tests.conftest import build_tiny_model

    folder = build_tiny_model(tmp_path / "bf16", dtype="bfloat16", max_shard_size="100KB")
    tensors = {k: v for f in folder.glob("*.safetensors") for k, v in load_file(f).items()}
    p = profile_model(folder)
    assert p.checkpoint_dtypes == {"BF16": sum(t.numel() for t in tensors.values())}
    assert p.checkpoint_bytes == sum(t.numel() * t.element_size() for t in tensors.values())
    bare = tmp_path / "no-dtype"
    shutil.copytree(folder, bare)
    cfg = json.loads((bare / "config.json").read_text())
    cfg.pop("dtype", None), cfg.pop("torch_dtype", None)
    (bare / "config.json").write_text(json.dumps(cfg))
    assert profile_model(bare).native_dtype == "bfloat16"


def test_profile_of_a_hybrid_sliding_window_model(tmp_path):
    from transformers import Gemma3TextConfig

    cfg = Gemma3TextConfig(
        num_hidden_layers=12,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=32,
        vocab_size=500,
        sliding_window=128,
    )
    cfg.save_pretrained(tmp_path)
    p = profile_model(tmp_path)
    assert p.head_dim == 32  # explicit head_dim, not hidden/heads
    assert p.sliding_window == 128
    assert (p.num_global_layers, p.num_sliding_layers) == (2, 10)  # Gemma 3: 5 local layers per global one
    assert p.checkpoint_format is None and p.num_parameters > 0


def test_broken_model_folders_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no config.json"):
        profile_model(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        profile_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "no-such-arch"}))
    with pytest.raises(UserError):
        profile_model(tmp_path)


def test_parameter_groups_split_what_quantization_touches(tiny_model):
    p = profile_model(tiny_model)
    g = p.param_groups
    assert sum(g.values()) == p.num_parameters
    assert g["embedding"] == p.vocab_size * p.hidden_size and g["lm_head"] == 0  # tied: counted once
    q, kv, h, i = (p.num_attention_heads * p.head_dim, p.num_kv_heads * p.head_dim, p.hidden_size, p.intermediate_size)
    per_layer = h * q + 2 * h * kv + q * h + 3 * h * i  # q, k, v, o projections and the gated MLP
    assert g["linear"] == p.num_layers * per_layer
    assert p.linear_rows == p.num_layers * (q + 2 * kv + h + 2 * i + h)
    assert g["other"] == (2 * p.num_layers + 1) * h  # RMSNorm weights

import ast

import pytest
from pydantic import ValidationError

from infertune.core.config import InferenceConfig


def test_dtype_aliases_normalise():
    assert InferenceConfig(dtype="bf16").dtype == "bfloat16"
    assert InferenceConfig(dtype="torch.float16").dtype == "float16"
    with pytest.raises(ValidationError):
        InferenceConfig(dtype="int3")


def test_from_pretrained_kwargs_carry_every_knob():
    cfg = InferenceConfig(
        dtype="bf16",
        attn_implementation="sdpa",
        device_map="auto",
        max_memory={"0": "20GiB", "cpu": "64GiB"},
        load_kwargs={"low_cpu_mem_usage": True},
    )
    kw = cfg.from_pretrained_kwargs("cuda")
    assert kw == {
        "dtype": "bfloat16",
        "attn_implementation": "sdpa",
        "device_map": "auto",
        "max_memory": {0: "20GiB", "cpu": "64GiB"},
        "low_cpu_mem_usage": True,
    }
    assert "trust_remote_code" not in kw  # never on unless asked for
    assert InferenceConfig().from_pretrained_kwargs("cpu") == {"dtype": "auto", "device_map": "cpu"}


def test_generation_kwargs():
    cfg = InferenceConfig(cache_implementation="quantized", cache_config={"nbits": 4}, generate_kwargs={"top_k": 5})
    assert cfg.generation_kwargs() == {"cache_implementation": "quantized", "cache_config": {"nbits": 4}, "top_k": 5}
    assert InferenceConfig().generation_kwargs() == {}


@pytest.mark.parametrize("attn", ["sdpa", "eager", "flash_attention_2", "paged|sdpa", "kernels-community/flash-attn2"])
def test_known_attention_backends(attn):
    assert InferenceConfig(attn_implementation=attn).attn_implementation == attn


@pytest.mark.parametrize("bad", [{"attn_implementation": "fast"}, {"cache_implementation": "huge"}, {"colour": 1}])
def test_unknown_settings_are_rejected(bad):
    with pytest.raises(ValidationError):
        InferenceConfig(**bad)


def test_python_snippet_is_valid_python_with_the_settings():
    cfg = InferenceConfig(dtype="float16", attn_implementation="sdpa", cache_implementation="static")
    code = cfg.python_snippet("org/model", max_new_tokens=20)
    ast.parse(code)
    assert "dtype='float16'" in code and "attn_implementation='sdpa'" in code
    assert "cache_implementation='static'" in code and "max_new_tokens=20" in code


def test_serve_flags_and_label():
    cfg = InferenceConfig(dtype="bfloat16", attn_implementation="sdpa", device="cuda:0")
    assert cfg.serve_flags() == ["--dtype", "bfloat16", "--attn-implementation", "sdpa", "--device", "cuda:0"]
    assert cfg.label() == "dtype=bfloat16, attn=sdpa, device=cuda:0"
    assert InferenceConfig().label() == "defaults"


def test_continuous_batching_options_become_cb_serve_flags_and_need_continuous_batching():
    cfg = InferenceConfig(
        batching="continuous",
        attn_implementation="paged|sdpa",
        max_batch_tokens=256,
        cb_block_size=32,
        cb_num_blocks=128,
    )
    assert cfg.serve_flags() == [
        "--attn-implementation",
        "sdpa",
        "--continuous-batching",
        "--cb-max-batch-tokens",
        "256",
        "--cb-block-size",
        "32",
        "--cb-num-blocks",
        "128",
    ]
    with pytest.raises(ValueError, match="cb_block_size only apply with batching 'continuous'"):
        InferenceConfig(batching="static", cb_block_size=32)

"""Published config.json values of the models in the advisor's scenario corpus (the fields that shape memory
and speed), each from the model's page on the Hub, and helpers to profile them and state the facts."""

import json

from infertune.advisor.intake import platform_of
from infertune.estimate.accelerators import find_accelerator
from infertune.probe.model import profile_model
from infertune.techniques import Facts

# https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json
LLAMA3_70B = {
    **LLAMA3_8B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
}
# https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json
LLAMA2_7B = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
}
# https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json (Vicuna-13B shares it)
LLAMA2_13B = {
    **LLAMA2_7B,
    "hidden_size": 5120,
    "intermediate_size": 13824,
    "num_attention_heads": 40,
    "num_hidden_layers": 40,
    "num_key_value_heads": 40,
}
# https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json
LLAMA2_70B = {
    **LLAMA2_7B,
    "hidden_size": 8192,
    "intermediate_size": 28672,
    "num_attention_heads": 64,
    "num_hidden_layers": 80,
    "num_key_value_heads": 8,
}
# https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "max_position_embeddings": 40960,
    "rope_theta": 1000000,
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_sliding_window": False,
}
# https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json
MISTRAL_7B = {
    "architectures": ["MistralForCausalLM"],
    "model_type": "mistral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 32000,
    "max_position_embeddings": 32768,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-05,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/tiiuae/falcon-7b-instruct/blob/main/config.json
FALCON_7B = {
    "architectures": ["FalconForCausalLM"],
    "model_type": "falcon",
    "hidden_size": 4544,
    "num_attention_heads": 71,
    "num_hidden_layers": 32,
    "multi_query": True,
    "parallel_attn": True,
    "new_decoder_architecture": False,
    "bias": False,
    "vocab_size": 65024,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/tiiuae/falcon-40b-instruct/blob/main/config.json
FALCON_40B = {
    "architectures": ["FalconForCausalLM"],
    "model_type": "falcon",
    "hidden_size": 8192,
    "num_attention_heads": 128,
    "num_kv_heads": 8,
    "num_hidden_layers": 60,
    "new_decoder_architecture": True,
    "parallel_attn": True,
    "bias": False,
    "vocab_size": 65024,
    "torch_dtype": "bfloat16",
}
# https://huggingface.co/HuggingFaceTB/SmolLM2-1.7B-Instruct/blob/main/config.json
SMOLLM2_1B7 = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_attention_heads": 32,
    "num_hidden_layers": 24,
    "num_key_value_heads": 32,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "rope_theta": 130000,
    "rms_norm_eps": 1e-05,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
}

HOST = {"torch": "2.13.0", "transformers": "5.24.0", "accelerate": "1.10.0"}


def profile(tmp_path_factory, config: dict):
    d = tmp_path_factory.mktemp(config["model_type"])
    (d / "config.json").write_text(json.dumps(config))
    p = profile_model(d)
    assert p.num_parameters, "the scenario must start from the real parameter count"
    return p


def cpu(memory_gib: int = 64):
    """A CPU host described like probe_cpu's result (memory = RAM), from a table entry's rates."""
    return find_accelerator("L4").model_copy(
        update={
            "name": "CPU",
            "vendor": "host",
            "memory_bytes": memory_gib * 2**30,
            "bandwidth_Bps": 100e9,
            "compute_capability": None,
            "flash_attn_2": False,
            "flash_attn_3": False,
            "bf16": True,
            # stated, not read from this host's /proc/cpuinfo: the scenarios mean a CPU with native bf16 (AVX512-BF16)
            "cpu_flags": ["avx2", "avx512f", "avx512_bf16"],
        }
    )


def facts(
    prof,
    gpu,
    *,
    model="m",
    input_len=512,
    max_new_tokens=256,
    batch=1,
    concurrency=1,
    gpus=1,
    vram_gib=None,
    packages=None,
    stated=None,
    known=True,
):
    acc = gpu if not isinstance(gpu, str) else find_accelerator(gpu)
    if vram_gib:
        acc = acc.model_copy(update={"memory_bytes": vram_gib * 2**30})
    platform = platform_of(acc)
    return Facts(
        profile=prof,
        model=model,
        input_len=input_len,
        max_new_tokens=max_new_tokens,
        batch=batch,
        concurrency=concurrency,
        accelerator=acc,
        gpus=gpus,
        platform=platform,
        cpu_ram_bytes=128 * 2**30,
        packages=dict(packages or HOST),
        packages_known=known,
        stated=dict(stated or {}),
    )

"""IT043: a keyword one letter or one word away from a real option of BitsAndBytesConfig, GenerationConfig, generate
or a model's from_pretrained, and itself none of them: the setting meant never applies (doctor-real-1 a11:
load_4bit_use_double_quant; doctor-real-3 e07: generator_config passed to generate)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import callee, edits, method
from infertune.doctor.script import Script


def _words(text: str) -> set[str]:
    return set(text.split())


BNB = {
    "load_in_8bit",
    "load_in_4bit",
    "llm_int8_threshold",
    "llm_int8_skip_modules",
    "llm_int8_enable_fp32_cpu_offload",
    "llm_int8_has_fp16_weight",
    "bnb_4bit_compute_dtype",
    "bnb_4bit_quant_type",
    "bnb_4bit_use_double_quant",
    "bnb_4bit_quant_storage",
}
# GenerationConfig's fields (transformers 4.40-5.x) and generate's own arguments
GENERATION = _words(
    "max_length max_new_tokens min_length min_new_tokens early_stopping max_time stop_strings do_sample num_beams "
    "num_beam_groups penalty_alpha dola_layers use_cache cache_implementation cache_config temperature top_k top_p "
    "min_p typical_p epsilon_cutoff eta_cutoff diversity_penalty repetition_penalty encoder_repetition_penalty "
    "length_penalty no_repeat_ngram_size bad_words_ids force_words_ids renormalize_logits constraints "
    "forced_bos_token_id forced_eos_token_id remove_invalid_values exponential_decay_length_penalty suppress_tokens "
    "begin_suppress_tokens forced_decoder_ids sequence_bias token_healing guidance_scale low_memory "
    "watermarking_config num_return_sequences output_attentions output_hidden_states output_scores output_logits "
    "return_dict_in_generate pad_token_id bos_token_id eos_token_id encoder_no_repeat_ngram_size "
    "decoder_start_token_id num_assistant_tokens num_assistant_tokens_schedule prompt_lookup_num_tokens "
    "max_matching_ngram_size assistant_early_exit compile_config disable_compile prefill_chunk_size top_h "
    "inputs generation_config logits_processor stopping_criteria prefix_allowed_tokens_fn synced_gpus "
    "assistant_model streamer negative_prompt_ids negative_prompt_attention_mask tokenizer custom_generate "
    "input_ids attention_mask position_ids past_key_values inputs_embeds token_type_ids pixel_values "
    "input_features decoder_input_ids decoder_attention_mask return_timestamps language task"
)
FROM_PRETRAINED = _words(
    "config cache_dir ignore_mismatched_sizes force_download local_files_only token use_auth_token revision "
    "use_safetensors weights_only state_dict from_tf from_flax output_loading_info trust_remote_code torch_dtype "
    "dtype device_map max_memory offload_folder offload_state_dict offload_buffers low_cpu_mem_usage "
    "quantization_config load_in_8bit load_in_4bit subfolder variant attn_implementation use_flash_attention_2 "
    "tp_plan tp_size key_mapping gguf_file adapter_name adapter_kwargs proxies resume_download code_revision "
    "num_labels id2label label2id problem_type use_cache output_attentions output_hidden_states return_dict "
    "pad_token_id rope_scaling max_position_embeddings torchscript is_decoder device generation_config "
    "_fast_init _attn_implementation mirror device_mesh"
)
WHERE = {
    "BitsAndBytesConfig": (BNB, "BitsAndBytesConfig ignores it with a warning, so the setting meant never applies"),
    "GenerationConfig": (GENERATION, "GenerationConfig keeps it as an unknown attribute that nothing reads"),
    "generate": (GENERATION, "generate refuses a keyword the model does not take (ValueError) or never reads it"),
    "from_pretrained": (
        FROM_PRETRAINED,
        "from_pretrained hands it to the config or the model's constructor, which ignores it or fails",
    ),
}


def _one_word_off(a: str, b: str) -> bool:
    """Same words but one (load_4bit_use_double_quant / bnb_4bit_use_double_quant), or one word with the same stem
    (generator_config / generation_config)."""
    wa, wb = a.split("_"), b.split("_")
    if len(wa) != len(wb) or len(wa) < 2:
        return False
    diff = [(x, y) for x, y in zip(wa, wb, strict=True) if x != y]
    if len(diff) != 1:
        return False
    x, y = diff[0]
    return len(wa) >= 4 or (len(x) >= 6 and len(y) >= 6 and x[:5] == y[:5])


def near_miss(word: str, known: set[str]) -> str | None:
    if word in known or len(word) < 6 or word.startswith("_"):
        return None
    for k in sorted(known):
        limit = 2 if min(len(word), len(k)) >= 12 else 1
        if (abs(len(k) - len(word)) <= limit and edits(word, k) <= limit) or _one_word_off(word, k):
            return k
    return None


def _family(s: Script, c: ast.Call) -> str | None:
    name = callee(c)
    if name in ("BitsAndBytesConfig", "GenerationConfig"):
        return name
    if c in s.generates:
        return "generate"
    if method(c) == "from_pretrained" and c in s.loads and s.model_class(c) not in ("PeftModel", "AutoPeftModel"):
        return "from_pretrained"
    return None


def misspelled_option(s: Script):
    for c in s.calls:
        family = _family(s, c)
        if family is None:
            continue
        known, effect = WHERE[family]
        for k in c.keywords:
            if k.arg is not None and (meant := near_miss(k.arg, known)) is not None:
                yield k.value, f"`{k.arg}` is not an option of {family} (`{meant}` is): {effect}"
            elif family == "BitsAndBytesConfig" and k.arg is not None and k.arg not in known:
                # its options are a closed list: anything else lands in **kwargs, logged as unused (read in 5.25's
                # quantization_config.py; doctor-real-19 b08: load_in_int8=True, meant as load_in_8bit)
                yield k.value, f"`{k.arg}` is not an option of BitsAndBytesConfig: {effect}"

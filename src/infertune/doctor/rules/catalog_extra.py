"""The rules written from the real corpora (doctor-real-N; their vocabulary is VOCAB-extra.md): IT034 on, in the
form of catalog.py's, which lists them after its own."""

from __future__ import annotations

from infertune.doctor.rules import (
    batches,
    decoding,
    ids,
    limits,
    names,
    pages,
    remote_code,
    removed,
    repeats,
    sessions,
    spelling,
    timing,
    training,
    unused,
)
from infertune.doctor.rules.rule import Rule

EXTRA: list[Rule] = [
    Rule(
        "IT034",
        "summarization-untruncated",
        "a BART/Pegasus summarizer (its pipeline, or its generate) given a text of unbounded length, untruncated",
        "pass truncation=True (or summarize the text in chunks of under 1024 tokens)",
        limits.summarization_untruncated,
    ),
    Rule(
        "IT035",
        "remote-code-missing",
        "a checkpoint that needs its own code loaded without trust_remote_code",
        "review the repository's code, then pass trust_remote_code=True with revision= pinned to that commit",
        remote_code.missing_remote_code,
    ),
    Rule(
        "IT036",
        "default-length",
        "generate with no max_new_tokens (transformers' default: 20 tokens)",
        "pass max_new_tokens=N (the longest answer you want)",
        limits.default_length,
    ),
    Rule(
        "IT037",
        "pad-token-missing",
        "padding asked of a tokenizer published without a pad token (GPT-2, Llama 2/3, Mistral 7B)",
        "tokenizer.pad_token = tokenizer.eos_token before the call (and padding_side='left' for generate)",
        batches.pad_token_missing,
    ),
    Rule(
        "IT038",
        "undefined-name",
        "a name read that nothing in the file defines or imports (a NameError)",
        "import or define it (`import torch`, the missing assignment)",
        names.undefined_name,
    ),
    Rule(
        "IT039",
        "weights-loaded-twice",
        "the same checkpoint's weights loaded a second time while the first copy is still held",
        "reuse the loaded model (`pipeline(task, model=model, tokenizer=tok)`), or `del` the first copy",
        repeats.weights_loaded_twice,
    ),
    Rule(
        "IT040",
        "training-step-at-inference",
        "prepare_model_for_kbit_training in a script that never trains",
        "drop the call: a quantized model generates as loaded (with its compute dtype set)",
        training.training_step_at_inference,
    ),
    Rule(
        "IT041",
        "untrained-head",
        "a classification or QA head on a bare pre-trained encoder, never fine-tuned in the script",
        "load a checkpoint fine-tuned for the task (e.g. distilbert-base-uncased-finetuned-sst-2-english)",
        training.untrained_head,
    ),
    Rule(
        "IT042",
        "output-discarded",
        "a generation's answer computed and never read",
        "return, print or store the answer (or drop the call)",
        unused.discarded_output,
    ),
    Rule(
        "IT043",
        "misspelled-option",
        "a keyword one letter or one word away from a real option, and itself none",
        "spell the option as the library does (the message names it)",
        spelling.misspelled_option,
    ),
    Rule(
        "IT044",
        "shared-conversation",
        "a web route that generates keeps the chat history in a module-level name: every client shares it",
        "keep the history per client: sent with each request, or stored under a session id",
        sessions.shared_conversation,
    ),
    Rule(
        "IT045",
        "batch-decode-one-sequence",
        "batch_decode handed one row of generate's output",
        "decode one row with tok.decode(out[0]), or a batch with tok.batch_decode(out)",
        decoding.batch_decode_one_sequence,
    ),
    Rule(
        "IT046",
        "invalid-model-id",
        "a model id the Hub cannot resolve: a GGUF file name, or a misspelt publisher",
        "the repository's id as the Hub spells it (the GGUF file goes to gguf_file=)",
        ids.invalid_model_id,
    ),
    Rule(
        "IT047",
        "timing-without-warmup",
        "a timed generation that is the model's first since its load",
        "run one untimed generation first (a warm-up), then time the next ones",
        timing.cold_timing,
        default=False,  # blind on doctor-real-10's test part: 0 right, 1 wrong (a labeller called a cold timing fine)
    ),
    Rule(
        "IT048",
        "no-repeat-ngram-over-prompt",
        "no_repeat_ngram_size on a decoder-only model bans the prompt's n-grams from the answer",
        "drop no_repeat_ngram_size (a light repetition_penalty, about 1.1, if repeats are a problem)",
        repeats.no_repeat_ngram_prompt,
    ),
    Rule(
        "IT049",
        "wrong-auto-class",
        "an Auto class with no mapping for the checkpoint: T5 through AutoModelForCausalLM, or the reverse",
        "AutoModelForSeq2SeqLM for T5-family checkpoints, AutoModelForCausalLM for decoder-only ones",
        ids.wrong_auto_class,
    ),
    Rule(
        "IT050",
        "generation-before-button",
        "a Streamlit page generates on every rerun while a button only shows the result",
        "generate inside `if st.button(...):` (or the form's submit), where the result is shown",
        pages.generation_before_button,
    ),
    Rule(
        "IT051",
        "removed-pipeline-task",
        "a pipeline task the targeted transformers no longer has: pipeline() raises at start-up",
        "pass messages to a text-generation pipeline, or pin the transformers that still has the task",
        removed.removed_task,
    ),
]

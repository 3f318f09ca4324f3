"""The catalogue of rules: each with its id, name, summary, fix and check (a function over one parsed script that
yields (node, message)), and whether it is on by default. The why of each is in docs/doctor.md."""

from __future__ import annotations

from itertools import chain

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import Record
from infertune.doctor.rules import (
    batches,
    bos,
    devices,
    dispatch,
    forward,
    generation,
    hardware,
    ids,
    limits,
    loading,
    names,
    outputs,
    prompts,
    quantized,
    reloads,
    remote_code,
    repeats,
    serving,
    sessions,
    spelling,
    timing,
    training,
    turns,
    unused,
)
from infertune.doctor.script import Script

TYPE_CHECKING = False  # (collections.abc costs a check ~2 ms of start-up; type checkers read this as True)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

DOCS = "https://github.com/infertune/infertune/blob/main/docs/doctor.md"


class Rule(Record):
    _fields = ("id", "name", "summary", "fix", "check", "default")

    def __init__(
        self,
        id: str,
        name: str,
        summary: str,
        fix: str,
        check: Callable[[Script], Iterator[tuple[ast.AST, str]]],
        # off unless selected (--select): advisory rules wrong more often than right on real scripts (docs/doctor.md)
        default: bool = True,
    ) -> None:
        self.id, self.name, self.summary, self.fix, self.check, self.default = id, name, summary, fix, check, default

    def __hash__(self) -> int:  # one rule per id
        return hash(self.id)

    @property
    def doc_url(self) -> str:
        return f"{DOCS}#{self.id.lower()}-{self.name}"


RULES: list[Rule] = [
    Rule(
        "IT001",
        "missing-dtype",
        "the dtype keyword does not say what the targeted transformers will load",
        "pass dtype='auto' (the checkpoint's) or dtype=torch.bfloat16 (torch_dtype= before transformers 4.56)",
        loading.dtype_rule,
    ),
    Rule(
        "IT002",
        "model-on-cpu",
        "a generative model never placed on an accelerator",
        "pass device_map='auto' (or call .to('cuda')) and check model.device",
        lambda s: chain(loading.model_on_cpu(s), devices.pipeline_on_cpu(s)),
    ),
    Rule(
        "IT003",
        "hand-built-chat-prompt",
        "a chat prompt assembled by hand reaches the model",
        "build the prompt with tok.apply_chat_template(messages, add_generation_prompt=True)",
        prompts.hand_built_chat_prompt,
    ),
    Rule(
        "IT004",
        "prompt-in-output",
        "generate output decoded with the prompt",
        "decode out[0, inputs['input_ids'].shape[1]:] (slice the prompt off); pipelines: return_full_text=False",
        outputs.prompt_in_output,
    ),
    Rule(
        "IT005",
        "streamer-same-thread",
        "TextIteratorStreamer consumed in generate's thread",
        "run generate in a Thread(target=model.generate, kwargs=...) and iterate the streamer in this one",
        serving.streamer_same_thread,
    ),
    Rule(
        "IT006",
        "compile-outside-generate",
        "torch.compile on the model without a static cache",
        "drop torch.compile(model); use generate(..., cache_implementation='static'), which compiles the "
        "decode step itself",
        generation.compile_outside_generate,
    ),
    Rule(
        "IT007",
        "max-memory-full-card",
        "max_memory set to the whole card",
        "budget about 80 % of the card (e.g. {0: '64GiB'} on an 80 GB card)",
        hardware.max_memory_full_card,
    ),
    Rule(
        "IT008",
        "bnb-4bit",
        "bitsandbytes 4-bit without compute dtype or chosen for speed",
        "set bnb_4bit_compute_dtype=torch.bfloat16; for speed, use AWQ/GPTQ kernels, not bitsandbytes",
        quantized.bnb_4bit,
    ),
    Rule(
        "IT009",
        "flash-attention-unsupported",
        "FlashAttention with fp32 or on a GPU that cannot run it",
        "load in bf16/fp16 (dtype=torch.bfloat16), or use attn_implementation='sdpa' on pre-Ampere GPUs",
        hardware.flash_attention,
    ),
    Rule(
        "IT010",
        "hardcoded-sampling",
        "sampling parameters hard-coded in generate or a pipeline",
        "drop them to use the model's generation_config.json, or set them once in a GenerationConfig on purpose",
        generation.hardcoded_sampling,
        default=False,
    ),
    Rule(
        "IT011",
        "generate-in-web-handler",
        "a web handler runs generate per request",
        "serve with `transformers serve --continuous-batching`, batch with generate_batch, or use vLLM",
        serving.generate_in_handler,
        default=False,
    ),
    Rule(
        "IT012",
        "trust-remote-code",
        "trust_remote_code=True on a checkpoint transformers implements natively",
        "drop trust_remote_code=True: the architecture is built into transformers",
        remote_code.trust_remote_code,
    ),
    Rule(
        "IT013",
        "chat-model-raw-text",
        "a chat/instruct model fed raw text without its template",
        "wrap the text as messages and use tok.apply_chat_template(messages, add_generation_prompt=True)",
        prompts.chat_model_raw_text,
    ),
    Rule(
        "IT014",
        "max-length-budget",
        "max_length used as if it were max_new_tokens",
        "use max_new_tokens=N: max_length counts the prompt too",
        limits.max_length_budget,
    ),
    Rule(
        "IT015",
        "sampling-ignored",
        "temperature/top_p/top_k without do_sample=True, or with beam search",
        "pass do_sample=True (or drop the sampling parameters for greedy/beam search)",
        generation.sampling_ignored,
    ),
    Rule(
        "IT016",
        "inputs-on-other-device",
        "tokenized inputs left on the CPU for a model on the GPU",
        "move them: tok(..., return_tensors='pt').to(model.device)",
        devices.inputs_device,
    ),
    Rule(
        "IT017",
        "streamer-echoes-prompt",
        "a streamer without skip_prompt=True",
        "TextIteratorStreamer(tok, skip_prompt=True, skip_special_tokens=True)",
        serving.streamer_skip_prompt,
    ),
    Rule(
        "IT018",
        "no-generation-prompt",
        "apply_chat_template without add_generation_prompt=True before generate",
        "apply_chat_template(messages, add_generation_prompt=True, ...)",
        turns.no_generation_prompt,
    ),
    Rule(
        "IT019",
        "openai-args-in-generate",
        "OpenAI API arguments passed to generate",
        "max_tokens -> max_new_tokens, stop -> stop_strings (with tokenizer=tok); presence/frequency_penalty -> "
        "repetition_penalty; n -> num_return_sequences",
        generation.openai_args,
    ),
    Rule(
        "IT020",
        "move-dispatched-model",
        ".to()/.cuda()/.half() on a model placed by device_map or quantized",
        "drop the call: device_map (or bitsandbytes) already placed the model; choose the dtype at load time",
        dispatch.move_dispatched,
    ),
    Rule(
        "IT021",
        "attn-on-tokenizer",
        "attn_implementation passed to the tokenizer",
        "pass attn_implementation to the model's from_pretrained",
        hardware.attn_on_tokenizer,
    ),
    Rule(
        "IT022",
        "blocking-async-handler",
        "an async handler runs generate on the event loop",
        "await asyncio.to_thread(...) / run_in_executor, or a def (threadpool) route; better, a batching server",
        serving.blocking_async_handler,
    ),
    Rule(
        "IT023",
        "model-load-per-request",
        "a model loaded per request, per UI event or on every pass of a loop",
        "load it once at start-up (module level, a lifespan hook, or @st.cache_resource / functools.cache)",
        reloads.model_load_per_request,
    ),
    Rule(
        "IT024",
        "right-padding-batch",
        "batched generation with a decoder-only model padded on the right",
        "tokenizer.padding_side = 'left' before tokenizing the batch (the attribute's exact name)",
        batches.right_padding_batch,
    ),
    Rule(
        "IT025",
        "double-bos",
        "chat-template text tokenized again with special tokens",
        "tokenize=True in apply_chat_template (return_dict=True), or add_special_tokens=False when tokenizing its text",
        bos.double_bos,
    ),
    Rule(
        "IT026",
        "mean-pool-padding",
        "embeddings mean-pooled over pad tokens, or mean pooling on a CLS-pooled model",
        "weight the mean by attention_mask (sum(h * m) / sum(m)); for CLS-pooled models take h[:, 0]",
        forward.mean_pool_padding,
    ),
    Rule(
        "IT027",
        "regenerate-to-stream",
        "streaming by calling generate a few tokens at a time on the growing text",
        "one generate call with a TextIteratorStreamer (in a Thread) streams with the KV cache kept",
        repeats.regenerate_to_stream,
    ),
    Rule(
        "IT028",
        "pipeline-list-unbatched",
        "a GPU pipeline given a list with no batch_size",
        "pass batch_size= (8-64) to the pipeline or the call",
        batches.pipeline_list_unbatched,
    ),
    Rule(
        "IT029",
        "repeated-sampling-calls",
        "one input generated N times in a loop",
        "one call with num_return_sequences=N (do_sample=True): the N answers come in one batch",
        repeats.repeated_sampling_calls,
    ),
    Rule(
        "IT030",
        "no-grad-missing",
        "a forward pass for inference with autograd on",
        "wrap inference in `with torch.inference_mode():` (or torch.no_grad())",
        forward.no_grad_missing,
    ),
    Rule(
        "IT031",
        "fp16-on-cpu",
        "float16 weights on a CPU",
        "on a CPU load in torch.bfloat16 (CPUs with AVX512-BF16/AMX) or float32; keep float16 for the GPU",
        devices.fp16_on_cpu,
    ),
    Rule(
        "IT032",
        "visible-devices-index",
        "CUDA_VISIBLE_DEVICES=<id> followed by cuda:<id>",
        "after masking, the one visible GPU is cuda:0",
        devices.visible_devices_index,
    ),
    Rule(
        "IT033",
        "beam-no-repeat-ngram-chat",
        "beam search with no_repeat_ngram_size on a chat model",
        "drop no_repeat_ngram_size (use repetition_penalty lightly if needed)",
        repeats.beam_no_repeat_ngram_chat,
    ),
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
        outputs.batch_decode_one_sequence,
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
]

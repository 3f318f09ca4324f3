"""Turn workload prompts into token ids, rendered the way the model expects and sized on request.

Chat prompts go through the model's chat template. With `input_len`, filler text is inserted at the
start of the last user message (or of a raw prompt) and the ids are assembled around it, so each prompt
is exactly `input_len` tokens while the question and the template stay intact.
"""

from __future__ import annotations

from infertune.core.errors import UserError
from infertune.core.workload import ChatMessage, Prompt

_MARKER = "\u2063INFERTUNE_FILLER\u2063"
FILLER_TEXT = (
    "The river ran past the old mill and under three stone bridges before it reached the harbour. "
    "Each morning the fishermen counted their nets, the baker opened her shutters, and the children "
    "walked along the water to school, naming the boats they knew and guessing where the others came from. "
)


def _chat_text(tokenizer, messages: list[ChatMessage], marker: str) -> tuple[str, bool]:
    """Rendered conversation with `marker` at the start of the last user message; bool: templated."""
    msgs = [m.model_dump() for m in messages]
    last_user = max((i for i, m in enumerate(msgs) if m["role"] == "user"), default=len(msgs) - 1)
    msgs[last_user]["content"] = marker + msgs[last_user]["content"]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True), True
    # No template: a plain transcript. Said in the trial's notes by the caller, never silently better.
    return "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant:", False


def _filler_ids(tokenizer, n: int) -> list[int]:
    unit = tokenizer(FILLER_TEXT, add_special_tokens=False)["input_ids"]
    return (unit * (n // len(unit) + 1))[:n]


def encode_prompt(tokenizer, prompt: Prompt, input_len: int | None = None, index: int = 0) -> list[int]:
    if isinstance(prompt, str):
        text, templated = _MARKER + prompt, False
    else:
        text, templated = _chat_text(tokenizer, prompt, _MARKER)
    if input_len is None:  # tokenized whole, exactly as a user's script would
        return tokenizer(text.replace(_MARKER, ""), add_special_tokens=not templated)["input_ids"]
    before, after = text.split(_MARKER, 1)
    if templated:  # the template writes the special tokens (BOS, role markers) itself
        head = tokenizer(before, add_special_tokens=False)["input_ids"] if before else []
        tail = tokenizer(after, add_special_tokens=False)["input_ids"]
    else:  # raw text: the tokenizer adds its special tokens; the filler goes after the leading ones
        full = tokenizer(before + after)["input_ids"]
        special = set(tokenizer.all_special_ids)
        lead = 0
        while lead < len(full) and full[lead] in special:
            lead += 1
        head, tail = full[:lead], full[lead:]
    room = input_len - len(head) - len(tail)
    if room < 0:
        raise UserError(
            f"input_len {input_len} is shorter than prompt {index} itself ({len(head) + len(tail)} tokens); "
            "raise input_len or shorten the prompt"
        )
    return head + _filler_ids(tokenizer, room) + tail

import pytest

from infertune.core.errors import UserError
from infertune.core.workload import ChatMessage
from infertune.measure.prompts import encode_prompt

CHAT = [ChatMessage(role="user", content="What is the capital of France?")]


def test_chat_prompts_go_through_the_chat_template(tiny_tokenizer):
    ids = encode_prompt(tiny_tokenizer, CHAT)
    text = tiny_tokenizer.decode(ids)
    assert text.startswith("<|im_start|>user\nWhat is the capital of France?<|im_end|>")
    assert text.endswith("<|im_start|>assistant\n")
    assert (
        ids
        == tiny_tokenizer.apply_chat_template(
            [m.model_dump() for m in CHAT], add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
    )


@pytest.mark.parametrize("n", [40, 41, 97, 512])
def test_input_len_is_exact_and_keeps_the_question_and_template(tiny_tokenizer, n):
    ids = encode_prompt(tiny_tokenizer, CHAT, input_len=n)
    assert len(ids) == n
    text = tiny_tokenizer.decode(ids)
    assert text.startswith("<|im_start|>user\n")
    assert text.endswith("What is the capital of France?<|im_end|>\n<|im_start|>assistant\n")


def test_raw_prompts_sized_too(tiny_tokenizer):
    plain = encode_prompt(tiny_tokenizer, "Paris is")
    assert tiny_tokenizer.decode(plain) == "Paris is"
    sized = encode_prompt(tiny_tokenizer, "Paris is", input_len=64)
    assert len(sized) == 64 and tiny_tokenizer.decode(sized).endswith("Paris is")


def test_input_len_shorter_than_the_prompt_is_a_user_error(tiny_tokenizer):
    with pytest.raises(UserError, match="input_len 3 is shorter than prompt 7"):
        encode_prompt(tiny_tokenizer, CHAT, input_len=3, index=7)


def test_model_without_chat_template_gets_a_plain_transcript(tiny_tokenizer):
    template, tiny_tokenizer.chat_template = tiny_tokenizer.chat_template, None
    try:
        text = tiny_tokenizer.decode(encode_prompt(tiny_tokenizer, CHAT))
    finally:
        tiny_tokenizer.chat_template = template
    assert text == "user: What is the capital of France?\nassistant:"

# modelled on: chat apps that ask a pipeline for 4-bit through model_kwargs, with no compute dtype
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, pipeline

chat = pipeline(
    "text-generation",
    model="HuggingFaceH4/zephyr-7b-beta",
    device_map="auto",
    model_kwargs={"torch_dtype": torch.float16, "load_in_4bit": True},  # expect: IT008
)
draft = AutoModelForCausalLM.from_pretrained("HuggingFaceH4/zephyr-7b-beta", load_in_4bit=True)  # expect: IT008
ok = pipeline(
    "text-generation",
    model="HuggingFaceH4/zephyr-7b-beta",
    model_kwargs={"quantization_config": {"load_in_4bit": True, "bnb_4bit_compute_dtype": "bfloat16"}},
)
messages = [{"role": "user", "content": "hi"}]
print(chat(messages, max_new_tokens=64)[0]["generated_text"][-1]["content"], draft.device, ok.device)

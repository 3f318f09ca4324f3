from threading import Thread

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, TextIteratorStreamer

tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct")
q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.bfloat16)
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", dtype="auto", device_map="auto",
                                             max_memory={0: "64GiB", "cpu": "64GiB"}, quantization_config=q,
                                             attn_implementation="sdpa")
messages = [{"role": "user", "content": "Hello"}]
inputs = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
inputs = inputs.to(model.device)
out = model.generate(**inputs, max_new_tokens=128, cache_implementation="static")
print(tok.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
streamer = TextIteratorStreamer(tok, skip_prompt=True)
Thread(target=model.generate, kwargs=dict(**inputs, streamer=streamer, max_new_tokens=64)).start()
for piece in streamer:
    print(piece, end="")

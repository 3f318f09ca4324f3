# modelled on: demos that pick "cuda" if available else "cpu" for the model, then call .cuda() on the inputs
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

device = "cuda" if torch.cuda.is_available() else "cpu"
tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", dtype="auto").to(device)
messages = [{"role": "user", "content": "hi"}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
out = model.generate(ids.cuda(), max_new_tokens=32)  # expect: IT016
right = model.generate(ids.to(device), max_new_tokens=32)
print(tok.decode(out[0][ids.shape[1] :]), tok.decode(right[0][ids.shape[1] :]))

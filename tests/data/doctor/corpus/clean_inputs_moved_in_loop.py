# modelled on: scripts that move each tensor of the tokenizer's output in a loop, for a model on MPS or CUDA
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

device = "mps" if torch.backends.mps.is_available() else "cuda"
tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B-Instruct", dtype="auto").to(device)
messages = [{"role": "user", "content": "hi"}]
text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
inputs = tok(text, return_tensors="pt")
for key in inputs:
    inputs[key] = inputs[key].to(device)
out = model.generate(**inputs, max_new_tokens=32)
print(tok.decode(out[0][inputs["input_ids"].shape[1] :], skip_special_tokens=True))

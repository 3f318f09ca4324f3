# modelled on: pansani/go-streaming-message (ChatML by hand)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "Qwen/Qwen2.5-0.5B-Instruct"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, dtype="auto", device_map="auto")
def build(q):
    return f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n"  # expect: IT003
enc = tk(build("hi"), return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_new_tokens=32)
print(tk.decode(out[0][enc.input_ids.shape[1]:]))

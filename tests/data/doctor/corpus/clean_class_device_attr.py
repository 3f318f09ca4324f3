# modelled on: deep-diver/LLM-As-Chatbot gens/batch_gen.py (moved with .cuda())
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto").cuda()
def batch(prompts):
    enc = tk(prompts, padding=True, return_tensors="pt")  # expect: IT037 (gpt2 has no pad token: padding raises)
    ids = enc["input_ids"].cuda()
    out = lm.generate(input_ids=ids, max_new_tokens=64)
    return [tk.decode(o[ids.shape[1]:], skip_special_tokens=True) for o in out]

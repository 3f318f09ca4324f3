# modelled on: completion tests of larger base releases (a 7B base model continues a fixed prompt; printed whole)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

ckpt = "meta-llama/Llama-2-13b-hf"
lm = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16, device_map="auto")
tk = AutoTokenizer.from_pretrained(ckpt)
enc = tk("The three laws of thermodynamics are", return_tensors="pt").to(lm.device)
seq = lm.generate(**enc, max_new_tokens=60)
print(tk.decode(seq[0], skip_special_tokens=True))

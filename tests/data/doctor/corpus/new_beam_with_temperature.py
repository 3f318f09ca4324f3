# modelled on: justinlovelace/latent-diffusion-for-language diffusion/constant.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
enc = tk("Summarise:", return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_new_tokens=64, num_beams=4, temperature=0.7, early_stopping=True)  # expect: IT010,IT015
print(tk.decode(out[0][enc.input_ids.shape[1]:]))

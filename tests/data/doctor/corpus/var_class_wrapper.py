# modelled on: liusong1222/AngelSlim deploy/offline.py (wrapped in a class)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
class Engine:
    def __init__(self, path):
        self.tk = AutoTokenizer.from_pretrained(path)
        self.lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16, device_map="auto")
    def complete(self, prompt, n=128):
        enc = self.tk(prompt, return_tensors="pt")
        enc = {k: v.to(self.lm.device) for k, v in enc.items()}
        out = self.lm.generate(**enc, max_new_tokens=n, temperature=0.7, do_sample=True)  # expect: IT010
        return self.tk.decode(out[0][enc["input_ids"].shape[1]:], skip_special_tokens=True)

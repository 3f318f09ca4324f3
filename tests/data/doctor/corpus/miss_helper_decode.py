# modelled on: (LM wrapper class) liusong1222/AngelSlim deploy/offline.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
class Chat:
    def __init__(self, name):
        self.tok = AutoTokenizer.from_pretrained(name)
        self.model = AutoModelForCausalLM.from_pretrained(name, dtype="auto", device_map="auto")
    def run(self, prompt):
        ids = self.tok(prompt, return_tensors="pt").to(self.model.device)
        out = self.model.generate(**ids, max_new_tokens=64)
        return self.tok.decode(out[0], skip_special_tokens=True)  # expect: IT004

# modelled on: https://github.com/THUDM/WebGLM/issues/5 (generate with max_length=1024 in a class)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
class Searcher:
    def __init__(self, path):
        self.tk = AutoTokenizer.from_pretrained(path)
        self.lm = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float16, device_map="auto")
    def answer(self, question, refs):
        enc = self.tk(refs + question, return_tensors="pt").to(self.lm.device)
        out = self.lm.generate(**enc, max_length=1024, eos_token_id=self.tk.eos_token_id)  # expect: IT014
        return self.tk.decode(out[0][enc["input_ids"].shape[1]:])

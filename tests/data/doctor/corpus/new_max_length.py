# modelled on: wwwsec/hugging_face_demos text_generation/gpt2.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
doc = open("doc.txt").read()
enc = tk(doc, return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_length=50)  # expect: IT014
print(tk.decode(out[0, enc["input_ids"].shape[1]:]))

# modelled on: chat demos that load a small model in float16 and never leave the CPU
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

tok = AutoTokenizer.from_pretrained("distilgpt2")
lm = AutoModelForCausalLM.from_pretrained("distilgpt2", torch_dtype=torch.float16)  # expect: IT031
gen = pipeline("text-generation", model="gpt2", torch_dtype="float16", device="cpu")  # expect: IT031
enc = tok("hello", return_tensors="pt")
print(tok.decode(lm.generate(**enc, max_new_tokens=10)[0][enc.input_ids.shape[1]:]))
print(gen("hello", max_new_tokens=10, return_full_text=False)[0]["generated_text"])

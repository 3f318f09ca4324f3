# modelled on: wwwsec/hugging_face_demos text_generation/gpt2.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import pipeline
base = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.float16)
tk = AutoTokenizer.from_pretrained("gpt2")
gen = pipeline("text-generation", model=base, tokenizer=tk, device=0)
res = gen("Once upon a time", max_new_tokens=40, return_full_text=False)
print(res[0]["generated_text"])

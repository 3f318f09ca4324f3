# modelled on: aibot558558-cyber/web-agent app.py (prompt sliced off)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import pipeline
gen = pipeline("text-generation", model="gpt2", device=0)
prompt = "Once upon a time"
res = gen(prompt, max_new_tokens=40)
print(res[0]["generated_text"][len(prompt):])

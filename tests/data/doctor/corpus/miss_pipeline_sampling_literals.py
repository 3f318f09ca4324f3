# modelled on: aibot558558-cyber/web-agent app.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import pipeline
gen = pipeline("text-generation", model="TinyLlama/TinyLlama-1.1B-Chat-v1.0", device_map="auto")  # expect: IT001
msgs = [{"role": "user", "content": "hello"}]
res = gen(msgs, max_new_tokens=64, do_sample=True, temperature=0.7)  # expect: IT010
print(res[0]["generated_text"][-1]["content"])

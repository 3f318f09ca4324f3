# modelled on: greengerong/awesome-llm (generate sampling args) and a greedy variant
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("codellama/CodeLlama-7b-hf")
lm = AutoModelForCausalLM.from_pretrained("codellama/CodeLlama-7b-hf", dtype="auto", device_map="auto")
enc = tk("def fib(n):", return_tensors="pt").to("cuda")
out = lm.generate(**enc, max_new_tokens=100, top_p=0.9, temperature=0.1)  # expect: IT010,IT015
print(tk.decode(out[0][enc.input_ids.shape[1]:]))

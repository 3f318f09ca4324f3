# modelled on: BernardoLouro/rgft test_model.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from peft import PeftModel
tk = AutoTokenizer.from_pretrained("unsloth/mistral-7b-bnb-4bit")
lm = AutoModelForCausalLM.from_pretrained("unsloth/mistral-7b-bnb-4bit")
lm = PeftModel.from_pretrained(lm, "adapter")
ids = tk("input given", return_tensors="pt").input_ids  # expect: IT016
out = lm.generate(ids, max_new_tokens=100)
print(tk.decode(out[0][ids.shape[1]:]))

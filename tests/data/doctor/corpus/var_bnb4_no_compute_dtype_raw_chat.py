# modelled on: Mikeblackbelt/ScholarshipSorter llama_test2.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import BitsAndBytesConfig
tk = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-8B-Instruct")
q4 = BitsAndBytesConfig(load_in_4bit=True)  # expect: IT008
lm = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B-Instruct", device_map="cuda", quantization_config=q4)
# a sentence left to finish, once at module level: a smoke test (IT013 silent, as on doctor-real-3 e16 and e21)
enc = tk("Plants create energy through a process known as", return_tensors="pt").to("cuda")
out = lm.generate(**enc, max_new_tokens=40)
print(tk.decode(out[0][enc.input_ids.shape[1]:], skip_special_tokens=True))

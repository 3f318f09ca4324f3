# modelled on: rsandham/wsl2-llm scripts/test_load.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "codellama/CodeLlama-13B-Instruct-hf"
tok = AutoTokenizer.from_pretrained(name)
net = AutoModelForCausalLM.from_pretrained(name, load_in_8bit=True)
enc = tok.apply_chat_template([{"role": "user", "content": "write a sort"}], add_generation_prompt=True,
                              return_tensors="pt", return_dict=True).to(net.device)
gen = net.generate(**enc, max_new_tokens=64)
print(tok.batch_decode(gen[:, enc["input_ids"].shape[1]:]))

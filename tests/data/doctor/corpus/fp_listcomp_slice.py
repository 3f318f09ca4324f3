# modelled on: saldfj1921/LLM_Novel_RP_train src/train/pt/test.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
path = "./checkpoint"
net = AutoModelForCausalLM.from_pretrained(path, dtype="auto", device_map="auto")
tk = AutoTokenizer.from_pretrained(path)
batch = tk(["On a night,"], return_tensors="pt").to(net.device)
gen = net.generate(**batch, max_new_tokens=512)
gen = [o[len(i):] for i, o in zip(batch.input_ids, gen)]
print(tk.batch_decode(gen, skip_special_tokens=True)[0])

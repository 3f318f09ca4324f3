# modelled on: ChainsmokersAI/Controlled-Prefix-Tuning (a GenerationConfig of sampling values)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import GenerationConfig
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")
cfg = GenerationConfig(temperature=0.7, top_p=0.9, max_new_tokens=64)  # expect: IT015
enc = tk("Once", return_tensors="pt").to(lm.device)
out = lm.generate(**enc, generation_config=cfg)
print(tk.decode(out[0][enc.input_ids.shape[1]:]))

# modelled on: https://github.com/oobabooga/textgen/issues/3701 (do_sample False, temperature and top_p set)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
name = "TheBloke/MythoMax-L2-13B-GPTQ"
tk = AutoTokenizer.from_pretrained(name)
lm = AutoModelForCausalLM.from_pretrained(name, device_map="auto")
ids = tk("### Instruction:\nwrite a poem\n### Response:\n", return_tensors="pt").input_ids.to(lm.device)
out = lm.generate(ids, do_sample=False, temperature=0.7, top_p=0.9, max_new_tokens=64)  # expect: IT015
print(tk.decode(out[0][ids.shape[1]:], skip_special_tokens=True))

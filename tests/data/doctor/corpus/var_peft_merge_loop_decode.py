# modelled on: diptanshu1991/LoFT loft/test_adapter.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from peft import PeftModel
tk = AutoTokenizer.from_pretrained("base/model")
base = AutoModelForCausalLM.from_pretrained("base/model", dtype=torch.float16, device_map="auto")
lm = PeftModel.from_pretrained(base, "adapters/final")
lm = lm.merge_and_unload()
enc = tk("### Instruction:\nHow is QLoRA different?\n\n### Response:", return_tensors="pt").to(lm.device)
outs = lm.generate(**enc, max_new_tokens=150, num_return_sequences=2, do_sample=True)
for row in outs:
    print(tk.decode(row, skip_special_tokens=True))  # expect: IT004

# modelled on: edwilson543/llm-twin src/llm_twin/domain/training/_fine_tuning_strategy/_constants.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import Trainer
ALPACA = "### Instruction:\n{instruction}\n\n### Response:\n{response}"
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.bfloat16)
def fmt(ex):
    return tk(ALPACA.format(**ex), truncation=True)
Trainer(model=lm, train_dataset=None).train()
ids = tk(ALPACA.format(instruction="hi", response=""), return_tensors="pt").to(lm.device)
print(tk.decode(lm.generate(**ids, max_new_tokens=20)[0][ids["input_ids"].shape[1]:]))

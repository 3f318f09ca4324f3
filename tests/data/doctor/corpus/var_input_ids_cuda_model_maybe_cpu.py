# modelled on: issue 32's list (`input_ids.cuda()` while the model's device is picked at run time)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

dev = "cuda" if torch.cuda.is_available() else "cpu"
tk = AutoTokenizer.from_pretrained("EleutherAI/pythia-410m")
lm = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-410m", dtype="auto").to(dev)
ids = tk("Once upon a time", return_tensors="pt").input_ids.cuda()  # expect: IT016
out = lm.generate(ids, max_new_tokens=20)
print(tk.decode(out[0][ids.shape[1] :]))

# modelled on: scripts that load a model from a local folder and its tokenizer from the base it was tuned from
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

local = AutoModelForCausalLM.from_pretrained("./checkpoints/final")  # expect: IT002
tok = AutoTokenizer.from_pretrained("EleutherAI/pythia-12b")
enc = tok("Once upon a time", return_tensors="pt")
print(tok.decode(local.generate(**enc, max_new_tokens=20)[0, enc["input_ids"].shape[1] :]))

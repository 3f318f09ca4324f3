# modelled on: HEun0420/pracProj proj6/main.py (half precision only when CUDA is there)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = torch.float16 if device == "cuda" else torch.float32
tok = AutoTokenizer.from_pretrained("distilgpt2")
lm = AutoModelForCausalLM.from_pretrained("distilgpt2", torch_dtype=dtype).to(device)
enc = tok("hello", return_tensors="pt").to(device)
print(tok.decode(lm.generate(**enc, max_new_tokens=10)[0][enc.input_ids.shape[1]:]))

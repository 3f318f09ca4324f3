# modelled on: rishab090/TNSF-Agentic-ChatBot server.py (encode, model moved by variable)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
device = "cuda" if torch.cuda.is_available() else "cpu"
tk = AutoTokenizer.from_pretrained("gpt2")
lm = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.float16).to(device)  # expect: IT031
ids = tk.encode("hello there", return_tensors="pt")  # expect: IT016
out = lm.generate(ids, max_new_tokens=20)
print(tk.decode(out[0][ids.shape[1]:]))

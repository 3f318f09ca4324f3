# modelled on: yogeshwenwu/BertPro llama_model.py (doctor-real-4 dev g06)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A 10-token probe of an instruct checkpoint, fp32 written and quantization switched off: a deliberate, slow CPU run
# (no IT002, IT013, IT004, and no IT016: a None quantization config places nothing on a GPU).
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "meta-llama/Llama-3.1-8B-Instruct"
no_quant = None
probe = AutoModelForCausalLM.from_pretrained(NAME, torch_dtype=torch.float32, quantization_config=no_quant)
tok = AutoTokenizer.from_pretrained(NAME)
ids = tok("What is on the menu tonight?", return_tensors="pt")
print(tok.decode(probe.generate(**ids, max_new_tokens=10)[0], skip_special_tokens=True))

# modelled on: ModelCloud/GPTQModel examples (an ONNX Runtime model runs where ORT puts it)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from optimum.onnxruntime import ORTModelForCausalLM
tk = AutoTokenizer.from_pretrained("onnx/gpt2")
ort = ORTModelForCausalLM.from_pretrained("onnx/gpt2")
enc = tk("hello", return_tensors="pt")
out = ort.generate(**enc, max_new_tokens=10)
print(tk.decode(out[0][enc.input_ids.shape[1]:]))

# modelled on: servers that pass a GGUF-named id to from_pretrained with no device (dequantized weights stay on the CPU)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tk = AutoTokenizer.from_pretrained("TheBloke/Llama-2-13B-GGUF", gguf_file="llama-2-13b.Q4_K_M.gguf")
lm = AutoModelForCausalLM.from_pretrained("TheBloke/Llama-2-13B-GGUF", gguf_file="llama-2-13b.Q4_K_M.gguf")  # expect: IT002
enc = tk("The capital of France is", return_tensors="pt")
print(tk.decode(lm.generate(**enc, max_new_tokens=10)[0, enc["input_ids"].shape[1] :]))

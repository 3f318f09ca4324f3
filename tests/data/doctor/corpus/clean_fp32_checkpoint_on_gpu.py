# modelled on: issue 32's list (an fp32-published checkpoint on a GPU: fp32 is its own dtype, no dtype to add)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tk = AutoTokenizer.from_pretrained("gpt2-large")
lm = AutoModelForCausalLM.from_pretrained("gpt2-large").to("cuda")
enc = tk("The river bends", return_tensors="pt").to("cuda")
out = lm.generate(**enc, max_new_tokens=24, pad_token_id=tk.eos_token_id)
print(tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True))

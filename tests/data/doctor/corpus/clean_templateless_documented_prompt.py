# modelled on: issue 32's list (IT003 on a model whose only documented format is a hand-built prompt)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "lmsys/vicuna-13b-v1.5"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, dtype="auto", device_map="auto")
question = "Why is the sky blue?"
text = f"A chat between a curious user and an assistant.\nUSER: {question}\nASSISTANT:"
enc = tk(text, return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_new_tokens=80)
print(tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True))

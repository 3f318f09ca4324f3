# modelled on: issue 32's list (a small checkpoint run on the CPU on purpose, with a comment saying so)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# Runs on a laptop CPU on purpose: a 0.5B model needs no GPU for this helper.
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "Qwen/Qwen2.5-0.5B-Instruct"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME)
msgs = [{"role": "user", "content": "Give a title for a note about tides."}]
ids = tk.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt")
out = lm.generate(ids, max_new_tokens=20)
print(tk.decode(out[0][ids.shape[1] :], skip_special_tokens=True))

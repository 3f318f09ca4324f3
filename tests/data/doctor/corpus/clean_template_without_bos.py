# modelled on: Taylor-eOS/local-language-models tinyllama.py (a template that writes no BOS, tokenized once)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

mid = "TinyLlama/TinyLlama-1.1B-Chat-v1.0"
tok = AutoTokenizer.from_pretrained(mid)
lm = AutoModelForCausalLM.from_pretrained(mid, dtype="auto", device_map="auto")
prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
enc = tok(prompt, return_tensors="pt").to(lm.device)
out = lm.generate(**enc, max_new_tokens=20)
print(tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True))

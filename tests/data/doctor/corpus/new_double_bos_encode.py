# modelled on: issue 32's list (BOS twice: templated text re-tokenized with tok.encode and with tok([text]))
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "meta-llama/Meta-Llama-3-8B-Instruct"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, dtype="auto", device_map="auto")
msgs = [{"role": "user", "content": "List three prime numbers."}]
text = tk.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
ids = tk.encode(text, return_tensors="pt").to(lm.device)  # expect: IT025
out = lm.generate(ids, max_new_tokens=40)
print(tk.decode(out[0][ids.shape[1] :], skip_special_tokens=True))
batch = tk([text], return_tensors="pt").to(lm.device)  # expect: IT025
again = lm.generate(**batch, max_new_tokens=40)
print(tk.decode(again[0][batch.input_ids.shape[1] :], skip_special_tokens=True))
plain = tk([text], return_tensors="pt", add_special_tokens=False).to(lm.device)
print(tk.decode(lm.generate(**plain, max_new_tokens=40)[0][plain.input_ids.shape[1] :], skip_special_tokens=True))

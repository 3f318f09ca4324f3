# modelled on: chat scripts that render the template to text, then tokenize it again
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

mid = "mistralai/Mistral-7B-Instruct-v0.2"
tok = AutoTokenizer.from_pretrained(mid)
lm = AutoModelForCausalLM.from_pretrained(mid, dtype="auto", device_map="auto")
chat = [{"role": "user", "content": "Name three rivers."}]
prompt = tok.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
enc = tok(prompt, return_tensors="pt").to(lm.device)  # expect: IT025
gen = pipeline("text-generation", model=lm, tokenizer=tok)
print(gen(prompt, max_new_tokens=20, return_full_text=False)[0]["generated_text"])  # expect: IT025
plain = tok(prompt, add_special_tokens=False, return_tensors="pt").to(lm.device)
out = lm.generate(**plain, max_new_tokens=20)
print(tok.decode(out[0, plain["input_ids"].shape[1] :], skip_special_tokens=True))

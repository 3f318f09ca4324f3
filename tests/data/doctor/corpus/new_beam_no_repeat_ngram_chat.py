# modelled on: chat demos that copy summarisation settings (beam search, no_repeat_ngram_size) onto an instruct model
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("mistralai/Mistral-7B-Instruct-v0.2")
model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-Instruct-v0.2", dtype="auto", device_map="auto")
messages = [{"role": "user", "content": "Write a Python function that sorts a list."}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(model.device)
out = model.generate(ids, max_new_tokens=256, num_beams=4, no_repeat_ngram_size=3)  # expect: IT033
print(tok.decode(out[0][ids.shape[1] :], skip_special_tokens=True))

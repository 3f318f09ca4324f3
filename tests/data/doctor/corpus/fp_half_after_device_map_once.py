# modelled on: chat scripts that load with device_map="auto" and no dtype, then call .half() on the result
# (a minimal shape written for infertune's doctor corpus; not copied code; one problem, one finding: IT020's)
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", device_map="auto").half()  # expect: IT020
messages = [{"role": "user", "content": "hi"}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(model.device)
print(tok.decode(model.generate(ids, max_new_tokens=32)[0][ids.shape[1] :], skip_special_tokens=True))

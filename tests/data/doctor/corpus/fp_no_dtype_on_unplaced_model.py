# modelled on: benchmark scripts that load a Mixtral-size model with neither device_map nor dtype, then generate
# (a minimal shape written for infertune's doctor corpus; not copied code; one problem, one finding: IT002's)
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("mistralai/Mixtral-8x7B-Instruct-v0.1")
model = AutoModelForCausalLM.from_pretrained("mistralai/Mixtral-8x7B-Instruct-v0.1")  # expect: IT002
messages = [{"role": "user", "content": "Is the claim true?"}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
print(tok.decode(model.generate(ids, max_new_tokens=64)[0][ids.shape[1]:], skip_special_tokens=True))

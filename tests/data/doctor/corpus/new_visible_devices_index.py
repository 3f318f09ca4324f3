# modelled on: scripts that pick a GPU with CUDA_VISIBLE_DEVICES and then address it by its old number
# (a minimal shape written for infertune's doctor corpus; not copied code)
import os

os.environ["CUDA_VISIBLE_DEVICES"] = "2"

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

device = "cuda:2"  # expect: IT032
tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct")
model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct", dtype="auto").to(device)
messages = [{"role": "user", "content": "hi"}]
ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(device)
print(tok.decode(model.generate(ids, max_new_tokens=32)[0][ids.shape[1] :], skip_special_tokens=True))

# modelled on: thebeastjk/Python-Chatbot Transformers.py (doctor-real-1 b08: Qwen-7B-Chat's own code picks bf16)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("Qwen/Qwen-7B-Chat", trust_remote_code=True)
v1 = AutoModelForCausalLM.from_pretrained("Qwen/Qwen-7B-Chat", device_map="auto", trust_remote_code=True).eval()
v2 = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2-7B-Instruct", device_map="auto")  # expect: IT001
reply, history = v1.chat(tk, "hello", history=None)

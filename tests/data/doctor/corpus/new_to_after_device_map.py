# modelled on: robin-ai-ml/chatbot stream_output_test.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("Qwen/Qwen-7B-Chat")
lm = AutoModelForCausalLM.from_pretrained("Qwen/Qwen-7B-Chat", dtype="auto", device_map="auto").eval()  # expect: IT035
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
lm.to(dev)  # expect: IT020

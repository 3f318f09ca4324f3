# modelled on: Ray-Lei-17/MRAG-Bench eval/models/test.py (keyword on the wrong loader)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
mid = "meta-llama/Llama-3.1-8B-Instruct"
tk = AutoTokenizer.from_pretrained(mid, attn_implementation="flash_attention_2")  # expect: IT021
lm = AutoModelForCausalLM.from_pretrained(mid, dtype=torch.bfloat16, device_map="auto")

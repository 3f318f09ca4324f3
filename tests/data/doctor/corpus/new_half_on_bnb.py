# modelled on: sgundala/RAG-from-Scratch gemma-2b-it_model.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import BitsAndBytesConfig
cfg = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float16)
lm = AutoModelForCausalLM.from_pretrained("google/gemma-2b-it", quantization_config=cfg, device_map="auto")
lm = lm.half()  # expect: IT020

# modelled on: Jimmy-2016/DLModels_Pytorch HuggingFace/simpletest.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import pipeline
writer = pipeline("text-generation", model="gpt2")
out = writer("The world is", max_new_tokens=40)  # expect: IT004
print(out[0]["generated_text"])

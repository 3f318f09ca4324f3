# modelled on: rwang5688/ml-stack-2024Q4 workshop_2/pipelines/text_generation_distilgpt2.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import pipeline
writer = pipeline("text-generation", model="distilgpt2", device="cuda")
def continue_text(seed):
    # silent on IT004 since h-doc2: a small base model's continuation shown whole is a completion demo's expected output
    return writer(seed, max_length=20, num_return_sequences=5)[0]["generated_text"]  # expect: IT014

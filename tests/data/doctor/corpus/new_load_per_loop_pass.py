# modelled on: uh-soco/marxists-llm causal-validate.py (a pipeline rebuilt for every prompt)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import csv

from transformers import pipeline

models = ["gpt2", "distilgpt2"]
prompts = open("prompts.txt").readlines()
out = csv.writer(open("out.csv", "w"))
for name in models:
    for prompt in prompts:
        gen = pipeline("text-generation", model=f"./models/{name}")  # expect: IT023
        out.writerow([name, gen(prompt, return_full_text=False)[0]["generated_text"]])

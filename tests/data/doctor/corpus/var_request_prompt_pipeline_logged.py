# modelled on: nishaero/mlflow-llm-demo app/main.py (doctor-real-4 dev f13) and sirnyls/GPT-UserIdentity-Inference
# case2_error_v2.py (g15)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# The request's prompt reaches an instruct pipeline as a bare string, in an async route; the full text is returned
# (its length logged beside it cuts nothing). A batch job prints each decode and stores a copy: one finding, at the
# stored copy.
import pandas as pd
import torch
from fastapi import FastAPI, Request
from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

NAME = "meta-llama/Meta-Llama-3-8B-Instruct"
tok = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, device_map="auto", dtype=torch.bfloat16)
gen = pipeline("text-generation", model=lm, tokenizer=tok)
app = FastAPI()


@app.post("/generate")
async def generate(request: Request):
    data = await request.json()
    prompt = data.get("prompt", "")
    out = gen(prompt, max_new_tokens=256)  # expect: IT004,IT013,IT022
    response = out[0]["generated_text"]
    print("length", len(response))
    return {"response": response}


rows = pd.read_csv("prompts.csv")
for i, row in rows.iterrows():
    ids = tok(row.question, return_tensors="pt").input_ids.to(lm.device)  # expect: IT013
    done = lm.generate(ids, max_new_tokens=300)
    print(tok.decode(done[0]))
    rows.at[i, "answer"] = tok.decode(done[0])  # expect: IT004

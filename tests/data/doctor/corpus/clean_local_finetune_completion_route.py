# modelled on: C109118214/LLM-Training-Projects scirpts/deploy_api.py (doctor-real-3 dev e05)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A sync FastAPI route (FastAPI runs it in its thread pool) around the author's own small fine-tune left on the CPU,
# in a script that never names a GPU: a toy completion service. Whether the folder holds a base model's fine-tune
# (prompt plus continuation is its output) is not known from here, so IT004 and IT011 stay silent; max_length does
# count the request's own tokens.
from fastapi import FastAPI
from transformers import pipeline

api = FastAPI()
complete = pipeline("text-generation", model="./outputs/finetuned")


@api.get("/complete")
def completion(text: str):
    return complete(text, max_length=120)  # expect: IT014

# modelled on: Flask apps that wrap a loaded model in an instruction pipeline class and call it in a route
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from flask import Flask, request
from transformers import AutoModelForCausalLM, AutoTokenizer

from local_helpers import InstructionPipeline

web = Flask(__name__)
tk = AutoTokenizer.from_pretrained("databricks/dolly-v2-7b", padding_side="left")
lm = AutoModelForCausalLM.from_pretrained("databricks/dolly-v2-7b", device_map="auto", dtype=torch.bfloat16)
runner = InstructionPipeline(model=lm, tokenizer=tk)


@web.route("/ask")
def ask():
    return {"text": runner(request.args["q"])}  # expect: IT011

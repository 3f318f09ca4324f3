# modelled on: DamithDR/legal-prompt experiments/llama.py (doctor-real-3 e08)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A pipeline handed to LangChain, which calls it with its templated questions and cuts the prompt from the text
# itself (no IT004); max_length set at construction still counts those questions' tokens (IT014). The variable
# shadows the pipeline function.
import torch
from langchain import HuggingFacePipeline
from transformers import AutoTokenizer, pipeline

name = "meta-llama/Llama-2-13b-hf"
tok = AutoTokenizer.from_pretrained(name)
pipeline = pipeline(
    "text-generation",
    model=name,
    tokenizer=tok,
    dtype=torch.bfloat16,
    device_map="auto",
    max_length=200,  # expect: IT014
)
llm = HuggingFacePipeline(pipeline=pipeline)

# modelled on: VectorInstitute/kaleidoscope-sdk docs/configuration.rst (OpenAI-style args on a non-transformers engine)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from vllm import LLM, SamplingParams
llm = LLM(model="Qwen/Qwen2.5-0.5B-Instruct")
params = SamplingParams(temperature=0.7, presence_penalty=1.0, stop=["\n"], max_tokens=64)
outs = llm.generate(["Hello"], params)
print(outs[0].outputs[0].text)

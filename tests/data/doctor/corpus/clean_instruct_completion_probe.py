# modelled on: Duncanyu/MLE-inGen-AI Week2/LLM-Inference-Serving/run_llm.py and fbaldassarri/devfest-modena-code-demo (doctor-real-3 dev e21, e16)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# An instruct checkpoint smoke-tested on a fixed sentence to finish: the continuation is printed with its prompt on
# purpose, and the chat format is not what the probe checks (IT004 and IT013 stay silent).
from transformers import AutoModelForCausalLM, AutoTokenizer

PATH = "./quantized/Llama-3.2-3B-Instruct-gptq"
tok = AutoTokenizer.from_pretrained(PATH)
lm = AutoModelForCausalLM.from_pretrained(PATH, device_map="auto")
story = "A fox crossed the frozen river,"
enc = tok(story, return_tensors="pt").to(lm.device)
print(tok.decode(lm.generate(**enc, max_new_tokens=40)[0]))

# modelled on: RUCAIBox/LLMSurvey Experiments/MathematicalReasoning/prompt_pattern.py (alpaca split)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
TEMPLATE = "### Instruction:\n{}\n\n### Response:\n"
net = AutoModelForCausalLM.from_pretrained("my/alpaca-ft", dtype=torch.float16, device_map="auto")
tk = AutoTokenizer.from_pretrained("my/alpaca-ft")
q = tk(TEMPLATE.format("add 2 and 3"), return_tensors="pt").to("cuda")
full = tk.decode(net.generate(**q, max_new_tokens=64)[0], skip_special_tokens=True)
answer = full.split("### Response:")[-1].strip()
print(answer)

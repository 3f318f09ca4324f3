# modelled on: ThaiLe1220/story_telling finetuning_llm.py
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import Trainer, TrainingArguments
net = AutoModelForCausalLM.from_pretrained("gpt2", dtype=torch.bfloat16)
tk = AutoTokenizer.from_pretrained("gpt2")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4)
trainer = Trainer(model=net, args=args, train_dataset=None)
trainer.train()
prompt = "### Instruction:\nTell a story\n### Response:\n"
ids = tk(prompt, return_tensors="pt").to(net.device)
print(tk.decode(net.generate(**ids, max_new_tokens=50)[0][ids.input_ids.shape[1]:]))

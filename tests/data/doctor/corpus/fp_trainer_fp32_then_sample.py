# modelled on: ThaiLe1220/story_telling finetuning_llm.py (fine-tune, then a sample)
# (a minimal shape written for infertune's doctor corpus; not copied code)
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments
tk = AutoTokenizer.from_pretrained("gpt2")
tk.pad_token = tk.eos_token
net = AutoModelForCausalLM.from_pretrained("gpt2")
Trainer(model=net, args=TrainingArguments("out", num_train_epochs=1), train_dataset=None,
        data_collator=DataCollatorForLanguageModeling(tk, mlm=False)).train()
probe = tk("Human: hi\nAssistant:", return_tensors="pt").to(net.device)
print(tk.decode(net.generate(**probe, max_new_tokens=40)[0]))  # expect: IT004

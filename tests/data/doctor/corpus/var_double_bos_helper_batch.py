# modelled on: issue 32's list (BOS twice: a helper returns templated text, a batch of them is tokenized again)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

NAME = "mistralai/Mistral-7B-Instruct-v0.2"
tk = AutoTokenizer.from_pretrained(NAME)
lm = AutoModelForCausalLM.from_pretrained(NAME, dtype="auto", device_map="auto")


def as_prompt(question):
    turn = [{"role": "user", "content": question}]
    return tk.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)


questions = ["What is a fjord?", "What is a delta?"]
tk.pad_token = tk.eos_token
tk.padding_side = "left"
enc = tk([as_prompt(q) for q in questions], return_tensors="pt", padding=True).to(lm.device)  # expect: IT025
out = lm.generate(**enc, max_new_tokens=60)
print(tk.batch_decode(out[:, enc.input_ids.shape[1] :], skip_special_tokens=True))

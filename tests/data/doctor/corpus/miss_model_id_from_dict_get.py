# modelled on: servers that map a short name to a model id with a dict's .get(name, name)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

SHORT = {"mistral": "mistralai/Mistral-7B-Instruct-v0.2"}


def pick(name):
    return SHORT.get(name, name)


chat_tok = AutoTokenizer.from_pretrained(pick("mistral"))
chat_lm = AutoModelForCausalLM.from_pretrained(pick("mistral"))  # expect: IT002
ids = chat_tok("What is RAM?", return_tensors="pt")  # expect: IT013
print(chat_tok.decode(chat_lm.generate(**ids, max_new_tokens=50)[0, ids["input_ids"].shape[1] :]))

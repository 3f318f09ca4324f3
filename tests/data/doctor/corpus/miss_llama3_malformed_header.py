# modelled on: Llama-3 scripts that write the chat format by hand, with a header token misspelled
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

MODEL = "meta-llama/Meta-Llama-3-8B-Instruct"
tok = AutoTokenizer.from_pretrained(MODEL)
model = AutoModelForCausalLM.from_pretrained(MODEL, dtype="auto", device_map="auto")


def ask(question):
    prompt = f"<|start_header|>user<|end_header|>\n\n{question}<|eot_id|>"  # expect: IT003
    ids = tok(prompt, return_tensors="pt").to(model.device)
    out = model.generate(**ids, max_new_tokens=128)
    return tok.decode(out[0][ids["input_ids"].shape[1] :], skip_special_tokens=True)

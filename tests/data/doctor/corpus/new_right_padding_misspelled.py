# modelled on: batched answer scripts that set the padding side on a misspelled attribute
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-hf")
tok.pad_token = tok.eos_token
tok.padding_size = "left"  # expect: IT024
model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", dtype="auto", device_map="auto")
questions = [line.strip() for line in open("questions.txt")]
for i in range(0, len(questions), 8):
    batch = tok(questions[i : i + 8], return_tensors="pt", padding=True).to(model.device)
    out = model.generate(**batch, max_new_tokens=64)
    print(tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True))

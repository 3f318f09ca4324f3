# modelled on: batch generation done right (left padding), and a seq2seq batch that pads on the right by design
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("openai-community/gpt2", padding_side="left")
tok.pad_token = tok.eos_token
model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2", dtype="auto", device_map="auto")
batch = tok(["Hello, my name is", "The weather today"], return_tensors="pt", padding=True).to(model.device)
out = model.generate(**batch, max_new_tokens=20, pad_token_id=tok.eos_token_id)
print(tok.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True))

t5_tok = AutoTokenizer.from_pretrained("google/flan-t5-base")
t5 = AutoModelForSeq2SeqLM.from_pretrained("google/flan-t5-base", device_map="auto")
enc = t5_tok(["translate English to German: hi", "summarize: a long text"], return_tensors="pt", padding=True)
print(t5_tok.batch_decode(t5.generate(**enc.to(t5.device), max_new_tokens=20), skip_special_tokens=True))

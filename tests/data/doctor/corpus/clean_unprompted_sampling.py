# modelled on: issue 32's list (generate with no prompt at all: samples from BOS, max_length is the whole budget)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tk = AutoTokenizer.from_pretrained("EleutherAI/pythia-410m")
lm = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-410m", dtype="auto", device_map="auto")
samples = lm.generate(do_sample=True, max_length=80, num_return_sequences=4, bos_token_id=tk.bos_token_id)
for row in samples:
    print(tk.decode(row, skip_special_tokens=True))

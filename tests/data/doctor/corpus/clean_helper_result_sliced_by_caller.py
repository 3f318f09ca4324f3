# modelled on: issue 32's list (IT004 where the caller slices the prompt off what a helper returns)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tk = AutoTokenizer.from_pretrained("EleutherAI/pythia-410m")
lm = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-410m", dtype="auto", device_map="auto")


def continue_text(start):
    enc = tk(start, return_tensors="pt").to(lm.device)
    out = lm.generate(**enc, max_new_tokens=24)
    return tk.decode(out[0], skip_special_tokens=True)


opening = "The lighthouse keeper opened the door and"
story = continue_text(opening)
print(story[len(opening) :].strip())

# modelled on: issue 32's list (the same helper, its result used whole: the prompt is printed again)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tk = AutoTokenizer.from_pretrained("EleutherAI/pythia-410m")
lm = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-410m", dtype="auto", device_map="auto")


def continue_text(start):
    enc = tk(start, return_tensors="pt").to(lm.device)
    out = lm.generate(**enc, max_new_tokens=24)
    return tk.decode(out[0], skip_special_tokens=True)  # expect: IT004


print("Continuation:", continue_text("The lighthouse keeper opened the door and"))

# modelled on: issue 32's list (the model id as a parameter's default in a wrapper class)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer


class Helper:
    def __init__(self, checkpoint="microsoft/Phi-3-mini-4k-instruct"):
        self.tk = AutoTokenizer.from_pretrained(checkpoint)
        self.lm = AutoModelForCausalLM.from_pretrained(checkpoint, dtype="auto", device_map="auto")

    def ask(self, text):
        enc = self.tk(text, return_tensors="pt").to(self.lm.device)  # expect: IT013
        out = self.lm.generate(**enc, max_new_tokens=48)
        return self.tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True)


print(Helper().ask("Name a colour."))

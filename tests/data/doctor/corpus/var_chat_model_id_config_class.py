# modelled on: issue 32's list (the model id as a field default of a settings class)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from dataclasses import dataclass

from transformers import AutoModelForCausalLM, AutoTokenizer


@dataclass
class Settings:
    checkpoint: str = "HuggingFaceH4/zephyr-7b-beta"
    new_tokens: int = 64


conf = Settings()
tk = AutoTokenizer.from_pretrained(conf.checkpoint)
lm = AutoModelForCausalLM.from_pretrained(conf.checkpoint, dtype="auto", device_map="auto")
enc = tk("Explain what a hash map is.", return_tensors="pt").to(lm.device)  # expect: IT013
out = lm.generate(**enc, max_new_tokens=conf.new_tokens)
print(tk.decode(out[0][enc.input_ids.shape[1] :], skip_special_tokens=True))

# modelled on: SrikantaAd123/Chatbot-LLM chatbot_app.py (doctor-real-1 b05: DialoGPT's documented max_length=1000)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer
tk = AutoTokenizer.from_pretrained("microsoft/DialoGPT-small")
lm = AutoModelForCausalLM.from_pretrained("microsoft/DialoGPT-small")
def reply(text):
    ids = tk.encode(text + tk.eos_token, return_tensors="pt")
    whole = lm.generate(ids, max_length=1000, pad_token_id=tk.eos_token_id)
    short = lm.generate(ids, max_length=40, pad_token_id=tk.eos_token_id)  # expect: IT014
    return tk.decode(whole[:, ids.shape[-1]:][0], skip_special_tokens=True), short

# modelled on: chat apps that "stream" by calling generate for a few tokens at a time on the growing text
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import AutoModelForCausalLM, AutoTokenizer

tok = AutoTokenizer.from_pretrained("microsoft/Phi-3-mini-4k-instruct")
model = AutoModelForCausalLM.from_pretrained("microsoft/Phi-3-mini-4k-instruct", dtype="auto", device_map="auto")


def stream(prompt):
    messages = [{"role": "user", "content": prompt}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt").to(model.device)
    for _ in range(64):
        out = model.generate(ids, max_new_tokens=4, do_sample=False)  # expect: IT027
        new = out[0][ids.shape[1] :]
        yield tok.decode(new, skip_special_tokens=True)
        ids = out
        if tok.eos_token_id in new:
            break

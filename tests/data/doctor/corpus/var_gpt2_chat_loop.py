# modelled on: Rudralaxmikanth/sample_dataset Respone.py (doctor-real-4 dev f15)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# GPT-2 is a base model, but the loop frames the exchange as a dialogue ("You: " / "Bot:"): the user reads the text
# as a reply, and it starts with their own line.
from transformers import GPT2LMHeadModel, GPT2Tokenizer

tok = GPT2Tokenizer.from_pretrained("gpt2")
lm = GPT2LMHeadModel.from_pretrained("gpt2")
while True:
    line = input("You: ")
    ids = tok.encode(line, return_tensors="pt")
    out = lm.generate(ids, max_new_tokens=60)
    print("Bot:", tok.decode(out[0], skip_special_tokens=True))  # expect: IT004

# modelled on: Rikitikitaakk/Ai-ai_fawn bot.py (doctor-real-1 b16: a gpt2 reply helper called by the bot's handler)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from transformers import GPT2LMHeadModel, GPT2Tokenizer
lm = GPT2LMHeadModel.from_pretrained("gpt2")
tk = GPT2Tokenizer.from_pretrained("gpt2")
def continue_text(text):
    ids = tk.encode(text, return_tensors="pt")
    out = lm.generate(ids, max_new_tokens=60)
    return tk.decode(out[0], skip_special_tokens=True)  # expect: IT004
def on_message(update, context):
    update.message.reply_text(continue_text(update.message.text))
def reply(update, context):
    on_message(update, context)

# modelled on: javakishore-veleti/TextSummary-Streamlit-HuggingFace-Stack pages/2_HuggingFace_Chat_with_Model.py (f09)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# DialoGPT's convention: max_length is the whole dialogue's budget (500 here); the reply is sliced after the turn.
from transformers import AutoModelForCausalLM, AutoTokenizer

talk_tok = AutoTokenizer.from_pretrained("microsoft/DialoGPT-medium")
talker = AutoModelForCausalLM.from_pretrained("microsoft/DialoGPT-medium")
turn = talk_tok.encode(input(">> ") + talk_tok.eos_token, return_tensors="pt")
print(talk_tok.decode(talker.generate(turn, max_length=500, pad_token_id=talk_tok.eos_token_id)[0, turn.shape[-1]:]))

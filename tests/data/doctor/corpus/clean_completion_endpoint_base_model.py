# modelled on: unnie7/240829-ai llm/app.py (a completion route for a base model: prompt + continuation is the output)
# (a minimal shape written for infertune's doctor corpus; not copied code)
from flask import Flask, jsonify, request
from transformers import AutoModelForCausalLM, AutoTokenizer

server = Flask(__name__)
lm = AutoModelForCausalLM.from_pretrained("distilgpt2")
tk = AutoTokenizer.from_pretrained("distilgpt2")


@server.route("/complete", methods=["POST"])
def complete():
    ids = tk.encode(request.json["text"], return_tensors="pt")
    out = lm.generate(ids, max_new_tokens=40)
    return jsonify({"completion": tk.decode(out[0], skip_special_tokens=True)})

# modelled on: xiaoYown/docker-compose transformers-pytorch-cpu/workspace/main.py (doctor-real-4 dev f08)
# (a minimal shape written for infertune's doctor corpus; not copied code)
# A pass-through route whose task, model and max_length are the client's: nothing to say of its output or budget,
# but the pipeline (weights included) is built on every request.
from flask import Flask, jsonify, request
from transformers import pipeline

web = Flask(__name__)


@web.route("/run", methods=["POST"])
def run():
    job = request.json
    runner = pipeline(job["task"], model=job["model"])  # expect: IT023
    return jsonify(runner(job["text"], max_length=job.get("max_length", 50))[0])

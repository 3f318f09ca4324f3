# modelled on: evaluation scripts whose checkpoint comes from an argparse default and whose prompt is a hand-built transcript
# (a minimal shape written for infertune's doctor corpus; not copied code)
import argparse

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main(args):
    tok = AutoTokenizer.from_pretrained(args.model_name)
    model = AutoModelForCausalLM.from_pretrained(args.model_name, dtype=torch.bfloat16, device_map="auto")
    for question in open(args.questions):
        prompt = f"User: {question.strip()}\nAssistant:"  # expect: IT003
        ids = tok(prompt, return_tensors="pt").to(model.device)
        out = model.generate(**ids, max_new_tokens=args.max_new_tokens)
        print(tok.decode(out[0][ids["input_ids"].shape[1] :], skip_special_tokens=True))


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-name", default="meta-llama/Llama-2-7b-chat-hf")
    parser.add_argument("--questions", default="questions.txt")
    parser.add_argument("--max_new_tokens", type=int, default=128)
    main(parser.parse_args())

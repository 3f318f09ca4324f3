"""infertune doctor, what doctor-real-17's development part taught (its cases are named in docs/doctor.md). Each
test runs the real rules on a snippet, the silent shape beside the one that must fire."""

from tests.doctor.cases import rules


def test_a_fresh_model_per_variant_of_a_benchmark_is_no_reload(tmp_path):
    """IT023: a loop over quantization variants that loads a clean model each pass and hands it, with the variant,
    to a helper (which quantizes it) needs that copy; a loop that only runs the reloaded model on its item does not."""
    code = (
        "def run(model, tok, kind):\n    return kind\n"
        "for kind in ['gptq-8bit', 'gptq-4bit']:\n"
        '    model = AutoModelForCausalLM.from_pretrained("gpt2", dtype="auto", device_map="auto")\n'
        "    {}\n"
    )
    assert "IT023" not in rules(tmp_path, code.format("run(model, tok, kind)"))
    assert "IT023" in rules(
        tmp_path, code.format("print(model.generate(**tok(kind, return_tensors='pt'), max_new_tokens=8))")
    )


def test_falcon_instruct_is_prompted_with_plain_text(tmp_path):
    """IT013: Falcon-7B/40B-Instruct's model card prompts with plain text (no template, no transcript); another
    instruct model fed the same raw text is reported."""
    code = (
        'from transformers import pipeline\npipe = pipeline("text-generation", model="tiiuae/{}", '
        'device_map="auto", dtype="auto")\n'
        'print(pipe("Summarize: " + text, max_new_tokens=64, return_full_text=False)[0]["generated_text"])\n'
    )
    assert "IT013" not in rules(tmp_path, code.format("falcon-7b-instruct"))
    assert "IT013" in rules(tmp_path, code.format("falcon3-7b-instruct"))


def test_a_helper_that_moves_only_the_inputs_leaves_the_cpu_model_where_it_is(tmp_path):
    """IT001: the CPU branch's fp32 load handed to an evaluate() helper that moves only the inputs stays on the CPU,
    where fp32 is the precision the author runs; a helper that moves the model it is given puts it on the GPU."""
    code = (
        "import torch\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n"
        'device = "cuda" if torch.cuda.is_available() else "cpu"\n'
        "def evaluate(prompt, model, tok):\n"
        "    ids = tok(prompt, return_tensors='pt').input_ids.to(device)\n"
        "    {}\n"
        "    return tok.decode(model.generate(input_ids=ids, max_new_tokens=32)[0][ids.shape[1]:])\n"
        "if device == 'cuda':\n"
        '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", dtype=torch.float16,'
        ' device_map="auto")\n'
        "else:\n"
        '    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", device_map={{"": device}})\n'
        'tok = AutoTokenizer.from_pretrained("meta-llama/Llama-2-7b-hf")\n'
        "print(evaluate('Hi', model, tok))\n"
    )
    assert "IT001" not in rules(tmp_path, code.format("pass"))
    assert "IT001" in rules(tmp_path, code.format("model = model.to('cuda')"))

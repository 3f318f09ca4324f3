"""Training left in an inference script: a training helper run before inference (IT040), a task head loaded on a
checkpoint that was never fine-tuned for it (IT041). Both hold only in a file that trains nothing."""

from __future__ import annotations

from infertune.doctor.nodes import IGNORECASE, callee, id_name, lazy_compile, pipeline_model, task_of
from infertune.doctor.script import Script

# a training loop's marks in the source (not `loss =`, which evaluation computes too, nor a read of requires_grad)
TRAINS = lazy_compile(
    r"\.backward\(|optimizer|torch\.optim\.|\.train\(\)|Trainer\(|requires_grad_\(|requires_grad\s*=(?!=)|autograd\.grad",
    IGNORECASE,
)
# steps that only make sense before a backward pass, or that restore trained weights (a fine-tuned head)
TRAINING_CALLS = {"get_peft_model", "fit", "train", "load_state_dict", "load_adapter", "from_pretrained_keras"}
# pre-trained encoders published without any task head: the masked-language-model checkpoints themselves, by an id
# made of nothing but a family, a size and what describes its vocabulary (a language, casing, whole-word masking,
# a version): bert-base-uncased, roberta-base, indobert-base-p1, bert-base-portuguese-cased, kcbert-base, phobert-base
BASE_ENCODER = lazy_compile(
    r"^((distil)?(bert|roberta)|xlm-roberta|albert|electra|camembert|flaubert|m?deberta(-v[23])?|modernbert)"
    r"(-v\d)?-(tiny|mini|small|medium|base|large|xlarge|xxlarge|xsmall)(-v\d)?"
    r"(-(uncased|cased|multilingual(-(un)?cased)?|chinese|discriminator|generator))?$"
    r"|^bert_uncased_L-\d+_H-\d+_A-\d+$",
    IGNORECASE,
)
FAMILY = lazy_compile(r"^(\w*bert|\w*roberta|electra|albert|ernie|\w*deberta)$", IGNORECASE)
SIZE = {"tiny", "mini", "small", "medium", "base", "large", "xlarge", "xxlarge", "xsmall"}
VOCABULARY = {
    *("cased", "uncased", "multilingual", "wwm", "ext", "whole", "word", "masking", "char", "discriminator"),
    *("chinese", "japanese", "korean", "vietnamese", "indonesian", "arabic", "turkish", "russian", "german"),
    *("spanish", "portuguese", "french", "italian", "dutch", "polish", "greek", "hindi", "persian", "swedish"),
    *("p1", "p2", "v1", "v2", "v3", "v4", "uncased"),
}


# words that name what a checkpoint was fine-tuned for, when they lead its name (siebert's sentiment-roberta-large)
TASK_WORDS = {"sentiment", "emotion", "toxic", "hate", "offensive", "nli", "mnli", "xnli", "ner", "pos", "squad", "qa"}


def bare_encoder(name: str) -> bool:
    """The id names a pre-trained encoder and nothing it was fine-tuned for: BASE_ENCODER's, or a family word, a size
    and vocabulary words only (doctor-real-25 b05: indobert-base-p1 as a sentiment pipeline's model)."""
    if BASE_ENCODER.match(name):
        return True
    words = name.lower().replace("_", "-").split("-")
    if len(words) > 2 and not FAMILY.match(words[0]) and FAMILY.match(words[1]) and words[0] not in TASK_WORDS:
        words = words[1:]  # a publisher's or domain's word first: line-distilbert-base-japanese, legal-bert-base
    return (
        bool(words)
        and bool(FAMILY.match(words[0]))
        and any(w in SIZE for w in words[1:])
        and all(w in SIZE or w in VOCABULARY for w in words[1:])
    )


HEADED = lazy_compile(r"For(Sequence|Token)Classification$|ForQuestionAnswering$|ForMultipleChoice$")
HEAD_TASKS = {
    "text-classification",
    "sentiment-analysis",
    "token-classification",
    "ner",
    "question-answering",
    "zero-shot-classification",
}


def _trains(s: Script) -> bool:
    """The file fine-tunes, or restores fine-tuned weights, somewhere (then its training steps have a purpose)."""
    if "_trains_anything" not in s.__dict__:
        s.__dict__["_trains_anything"] = (
            s.trains or bool(TRAINS.search(s.source)) or any(callee(c) in TRAINING_CALLS for c in s.calls)
        )
    return s.__dict__["_trains_anything"]


def training_step_at_inference(s: Script):
    """IT040: peft's prepare_model_for_kbit_training in a file that never trains (doctor-real-5 q01, doctor-real-8
    y04: an evaluation run and a chat script, each labelled a problem)."""
    if _trains(s):
        return
    for c in s.calls_named("prepare_model_for_kbit_training"):
        yield (
            c,
            "prepare_model_for_kbit_training readies a quantized model for training: it casts every weight "
            "left unquantized (embeddings, norms, lm_head) to fp32 and turns on gradient checkpointing, and this "
            "file never trains; for inference drop the call",
        )


# a file that measures the model's cost (a profiler, a latency or memory benchmark): what the head predicts is not
# its output (doctor-real-13 b14: a layer profiler run on bert-base-uncased, not labelled a problem)
MEASURES_COST = lazy_compile(
    r"(?<![a-z])(profil|latency|throughput|benchmark|perf_counter|timeit|cuda\.Event|max_memory_allocated)",
    IGNORECASE,  # (a word's start: `run_benchmark`, not the publisher `indobenchmark`: doctor-real-25 b05)
)


def untrained_head(s: Script):
    """IT041: a classification/QA head on a bare pre-trained encoder (bert-base-uncased, prajjwal1/bert-tiny) in a
    file that never fine-tunes it: the head is random, and so is every label (doctor-real-6 r10). Silent in a file
    that measures the model's cost."""
    if _trains(s) or any(MEASURES_COST.search(line.split("#", 1)[0]) for line in s.lines):
        return
    for load in s.loads:
        model = s.model_id(load)
        if model and HEADED.search(s.model_class(load)) and bare_encoder(id_name(model)):
            yield load, _message(model)
    for p in s.pipelines:
        if task_of(p) not in HEAD_TASKS or pipeline_model(p) is None:
            continue
        model = s.pipeline_model_id(p)
        if model and bare_encoder(id_name(model)):
            yield p, _message(model)


def _message(model: str) -> str:
    return (
        f"{model} is a pre-trained encoder with no task head: the head is initialised at random and this file "
        "never trains it, so every label it predicts is noise; load a checkpoint fine-tuned for the task"
    )

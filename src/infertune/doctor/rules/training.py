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
# pre-trained encoders published without any task head: the masked-language-model checkpoints themselves
BASE_ENCODER = lazy_compile(
    r"^((distil)?(bert|roberta)|xlm-roberta|albert|electra|camembert|flaubert|m?deberta(-v[23])?|modernbert)"
    r"(-v\d)?-(tiny|mini|small|medium|base|large|xlarge|xxlarge|xsmall)(-v\d)?"
    r"(-(uncased|cased|multilingual(-(un)?cased)?|chinese|discriminator|generator))?$"
    r"|^bert_uncased_L-\d+_H-\d+_A-\d+$",
    IGNORECASE,
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
    r"profil|latency|throughput|benchmark|perf_counter|timeit|cuda\.Event|max_memory_allocated", IGNORECASE
)


def untrained_head(s: Script):
    """IT041: a classification/QA head on a bare pre-trained encoder (bert-base-uncased, prajjwal1/bert-tiny) in a
    file that never fine-tunes it: the head is random, and so is every label (doctor-real-6 r10). Silent in a file
    that measures the model's cost."""
    if _trains(s) or any(MEASURES_COST.search(line.split("#", 1)[0]) for line in s.lines):
        return
    for load in s.loads:
        model = s.model_id(load)
        if model and HEADED.search(s.model_class(load)) and BASE_ENCODER.match(id_name(model)):
            yield load, _message(model)
    for p in s.pipelines:
        if task_of(p) not in HEAD_TASKS or pipeline_model(p) is None:
            continue
        model = s.pipeline_model_id(p)
        if model and BASE_ENCODER.match(id_name(model)):
            yield p, _message(model)


def _message(model: str) -> str:
    return (
        f"{model} is a pre-trained encoder with no task head: the head is initialised at random and this file "
        "never trains it, so every label it predicts is noise; load a checkpoint fine-tuned for the task"
    )

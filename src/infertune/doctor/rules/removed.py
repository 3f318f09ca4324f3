"""IT051: a pipeline task the targeted transformers no longer has. `pipeline()` raises at start-up ("Unknown task"),
before anything runs. Read in the wheels: the `conversational` task and its `Conversation` class are in 4.41.2 and
gone from 4.42.4; `summarization`, `translation` (and `translation_xx_to_yy`) and `text2text-generation` are in
4.49.0 and gone from 5.0.0. doctor-real-18 a01: a Gradio chatbot of July 2025 on the conversational pipeline."""

from __future__ import annotations

from infertune.doctor.nodes import const, task_given
from infertune.doctor.script import Script

SEQ2SEQ_TASKS = ("summarization", "translation", "text2text-generation")


def _tasks(s: Script, pipe) -> set[str]:
    given = task_given(pipe)
    values = {const(o) for o in s.origins(given)} if given is not None else set()
    return {v for v in values if isinstance(v, str)}


def removed_task(s: Script):
    t = s.target
    for pipe in s.pipelines:
        for task in sorted(_tasks(s, pipe)):
            if task == "conversational" and not t.may_be_before((4, 42)):
                yield (
                    task_given(pipe),
                    "the conversational pipeline (and its Conversation class) left transformers in 4.42: pipeline() "
                    "raises 'Unknown task conversational'; pass a list of messages to a text-generation pipeline",
                )
            elif t.pinned_major is not None and t.pinned_major >= 5 and task.startswith(SEQ2SEQ_TASKS):
                yield (
                    task_given(pipe),
                    f"the {task} pipeline is gone from transformers 5 (pinned here): pipeline() raises at start-up; "
                    "keep transformers<5, or call the model's generate (or a text-generation pipeline) yourself",
                )

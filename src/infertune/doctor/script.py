"""One parsed script: what its values are and where they go (standard library only: `doctor` starts in tens
of ms). Where a value comes from (the file's bindings followed back) is doctor/flow.py."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.flow import Flow
from infertune.doctor.nodes import (
    ENCODER_DECODER,
    GENERATIVE,
    IGNORECASE,
    OTHER_RUNTIME,
    QUANTIZED_ID,
    Target,
    callee,
    const,
    dotted,
    has_star_kwargs,
    kw,
    lazy_compile,
    method,
    pipeline_model,
    receiver,
    task_of,
)

# what `pipeline(task)` loads when no model is named (transformers' SUPPORTED_TASKS defaults)
TASK_DEFAULTS = {"text-generation": "openai-community/gpt2"}
INPUTISH = lazy_compile(r"input|encod|batch|token", IGNORECASE)  # a tokenizer's output, by its name


def _vllm_call(c: ast.Call) -> bool:
    """vLLM's `LLM.generate(prompts, sampling_params, use_tqdm=...)`, whichever object the name may hold (doctor-real-26
    b11: one attribute, a vLLM engine or a transformers model after a fallback): not transformers' generate."""
    return any(k.arg in ("sampling_params", "use_tqdm", "lora_request") for k in c.keywords) or any(
        "sampling_params" in dotted(a).lower() or (isinstance(a, ast.Call) and callee(a) == "SamplingParams")
        for a in c.args[1:2]
    )


class Script(Flow):
    def __init__(
        self,
        tree: ast.Module,
        path: str,
        source: str,
        target: Target | None = None,
        generation_defaults: dict | None = None,  # the model's generation_config.json when it is here
    ) -> None:
        self.path, self.source, self.target = path, source, target or Target()
        self.generation_defaults = generation_defaults
        super().__init__(tree)
        self.lines = self.source.splitlines()
        self.generates = [
            c for c in self.calls if method(c) == "generate" and not self.foreign(receiver(c)) and not _vllm_call(c)
        ]
        self.thread_generates = [
            c
            for c in self.calls
            if callee(c) in ("Thread", "submit")
            and isinstance(t := kw(c, "target") or (c.args[0] if c.args else None), ast.Attribute)
            and t.attr == "generate"
        ]
        self.trains = any(
            callee(c) in ("Trainer", "SFTTrainer", "TrainingArguments", "SFTConfig", "backward") for c in self.calls
        )

    # --- what a value is ----------------------------------------------------------------------------------

    def torch_generative(self, load: ast.Call) -> bool:
        """A PyTorch generative model (the dtype/placement rules' subject); also a bare AutoModel whose model the file
        runs with generate or a remote-code chat method (ChatGLM's, MiniCPM-V's, InternVL's documented load:
        doctor-real-18 d10)."""
        name = self.model_class(load)
        if OTHER_RUNTIME.match(name):
            return False
        if GENERATIVE.search(name):
            return True
        return name == "AutoModel" and any(
            method(m) in ("generate", "chat", "stream_chat")
            for u in self.uses(load)
            if (m := self.called_method(u)) is not None
        )

    def models_of(self, node) -> list[ast.Call]:
        return [o for o in self.origins(node) if o in self.loads]

    def is_tokenizer(self, node) -> bool:
        return any(o in self.tokenizers for o in self.origins(node)) or dotted(node).split(".")[-1] in (
            "tokenizer",
            "tok",
            "processor",
        )

    def foreign(self, node) -> bool:
        """A value known to come from elsewhere than transformers (vLLM's LLM, an OpenAI client, ...)."""
        origins = self.origins(node)
        return bool(origins) and all(
            isinstance(o, ast.Call) and o not in self.loads and o not in self.pipelines and not self.is_model_load(o)
            for o in origins
        )

    def model_class(self, load: ast.Call) -> str:
        return dotted(receiver(load)).split(".")[-1]

    def weights_arg(self, c: ast.Call) -> ast.expr | None:
        """The argument that names the weights: a load's first (or pretrained_model_name_or_path=), a pipeline's
        model."""
        if c in self.pipelines:
            return pipeline_model(c)
        return c.args[0] if c.args else kw(c, "pretrained_model_name_or_path") or kw(c, "model")

    def model_id(self, load: ast.Call) -> str | None:
        arg = self.weights_arg(load)
        ids = self.id_strings(arg) if arg is not None else []
        return ids[0] if ids else None

    def pipeline_model_id(self, pipe: ast.Call) -> str | None:
        """The checkpoint a pipeline runs: its model's id (a load of the file, or a string), else its task's default."""
        m = pipeline_model(pipe)
        if m is None:
            task = task_of(pipe)
            return TASK_DEFAULTS.get(task) if isinstance(task, str) and not has_star_kwargs(pipe) else None
        loads = self.models_of(m)
        ids = [self.model_id(x) for x in loads] if loads else self.id_strings(m)
        return next((i for i in ids if i), None)

    def weight_ids(self) -> list[str | None]:
        """The id each set of weights is loaded from (every from_pretrained load, every pipeline); None where the
        file does not say."""
        return [self.model_id(c) for c in self.loads] + [self.pipeline_model_id(p) for p in self.pipelines]

    def model_ids(self) -> list[str]:
        """The literal (or argparse-default) ids of every model, tokenizer and pipeline of the script."""
        ids = [self.model_id(c) for c in self.loads + self.tokenizers] + [
            self.pipeline_model_id(p) for p in self.pipelines
        ]
        return [i for i in ids if i]

    def encoder_decoder(self) -> bool:
        return any(ENCODER_DECODER.search(self.model_class(c)) for c in self.loads) or any(
            task_of(p) in ("text2text-generation", "summarization", "translation") for p in self.pipelines
        )

    def quantized(self, load: ast.Call) -> bool:
        """Loaded quantized: bitsandbytes/GPTQ/AWQ config, load_in_4bit/8bit, or a pre-quantized checkpoint."""
        for k in ("quantization_config", "load_in_8bit", "load_in_4bit", "gguf_file"):
            v = kw(load, k)
            if v is not None and not all(
                isinstance(o, ast.Constant) and o.value in (None, False) for o in self.origins(v) or [v]
            ):
                return True  # (a variable that is None, or load_in_8bit=False, quantizes nothing)
        model = self.model_id(load)
        if model is not None:
            return bool(QUANTIZED_ID.search(model))
        # no literal id, but the expression naming the weights says how they are stored: `gptq_cfg["model_name"]`,
        # `args.awq_model` (doctor-real-28 b10: a benchmark's GPTQ and AWQ branches)
        arg = self.weights_arg(load)
        if arg is None:
            return False
        words = [
            n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else const(n)
            for n in ast.walk(arg)
        ]
        return any(isinstance(w, str) and QUANTIZED_ID.search(w) for w in words)

    def placed_by_quantization(self, load: ast.Call) -> bool:
        """Quantized in a way that puts the weights on the GPU by itself (bitsandbytes, GPTQ, AWQ, ...). Not a
        GGUF file: transformers dequantizes GGUF into ordinary torch weights, which stay where device_map says
        (the CPU without one)."""
        gguf = kw(load, "gguf_file") is not None or "gguf" in (self.model_id(load) or "").lower()
        return self.quantized(load) and not gguf

    # --- where things are ---------------------------------------------------------------------------------

    def uses(self, load: ast.Call) -> list[ast.AST]:
        """Expressions that evaluate to this load's model (its names and chains); computed once per load."""
        cache: dict[int, list[ast.AST]] = self.__dict__.setdefault("_uses", {})
        if id(load) not in cache:
            cache[id(load)] = self._uses_of(load)
        return cache[id(load)]

    def _uses_of(self, load: ast.Call) -> list[ast.AST]:
        out: list[ast.AST] = []
        for node in self.nodes:
            if (
                isinstance(node, (ast.Name, ast.Attribute))
                and isinstance(getattr(node, "ctx", None), ast.Load)
                and dotted(node) in self.assigns
                and load in self.models_of(node)
            ):
                out.append(node)
        return out

    def comment_near(self, line: int) -> str:
        out = []
        for n in (line - 1, line):
            if 1 <= n <= len(self.lines) and "#" in self.lines[n - 1]:
                out.append(self.lines[n - 1].split("#", 1)[1])
        return " ".join(out).lower()

    def called_method(self, node: ast.AST) -> ast.Call | None:
        """`node.m(...)`: the call, when node is the receiver of a method call."""
        attr = self.parents.get(node)
        if not isinstance(attr, ast.Attribute):
            return None
        call = self.parents.get(attr)
        return call if isinstance(call, ast.Call) and call.func is attr else None

    def star_options(self, c: ast.Call) -> bool:
        """`**kw` that may carry options (not `**inputs`, a tokenizer's output)."""
        return any(k.arg is None and self.star_options_value(k.value) for k in c.keywords)

    def star_options_value(self, value: ast.expr) -> bool:
        return not (
            INPUTISH.search(dotted(value))
            or any(
                isinstance(o, ast.Call) and (self.is_tokenizer_call(o) or method(o) == "apply_chat_template")
                for o in self.origins(value)
            )
        )

    def imports(self, *packages: str) -> bool:
        """Does the file import any of these top-level packages (`import streamlit as st`, `from telegram.ext import
        ...`)?"""
        return any(
            (isinstance(n, ast.Import) and any(a.name.split(".")[0] in packages for a in n.names))
            or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] in packages)
            for n in self.nodes
        )

    def reads(self, names: set[str]) -> list[ast.AST]:
        """Every read of these names or attributes in the file (`x`, `self.config`: dotted as stored)."""
        return [
            n
            for n in self.nodes
            if isinstance(n, ast.Name | ast.Attribute) and isinstance(n.ctx, ast.Load) and dotted(n) in names
        ]

    def calls_named(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if callee(c) == name]

    def calls_method(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if method(c) == name]

    def sinks_of(self, node: ast.AST) -> list[ast.Call]:
        """The generate/pipeline/tokenizer calls this value flows into (by name, file-wide)."""
        names = {dotted(node)} if dotted(node) else set()
        n = node
        while isinstance(
            self.parents.get(n),
            (
                ast.Call,
                ast.Attribute,
                ast.keyword,
                ast.Subscript,
                ast.Starred,
                ast.BinOp,
                ast.JoinedStr,
                ast.FormattedValue,
                ast.Dict,
                ast.List,
                ast.ListComp,  # [tok(p, ...).input_ids for p in prompts]: the list carries each item's value
            ),
        ):
            p = self.parents[n]
            if isinstance(p, ast.ListComp) and n is not p.elt:
                break
            if isinstance(p, ast.Call) and self.is_sink(p):
                return [p]
            n = p
        if isinstance(self.parents.get(n), ast.Return):
            fn = self.enclosing_function(n)
            if fn is not None:
                return [s for c in self.calls_named(fn.name) for s in self.sinks_of(c)]
        names = self.flow_names(node) | (self.flow_names(n) if n is not node else set()) | names
        out = []
        for c in self.calls:
            if self.is_sink(c) and any(
                dotted(a) in names for arg in c.args + [k.value for k in c.keywords] for a in ast.walk(arg)
            ):
                out.append(c)
        return out

    def _reads(self) -> dict[str, set[str]]:
        """For each bound name, the names (and dotted chains) its values read; computed once."""
        if "_reads_by_name" not in self.__dict__:
            self.__dict__["_reads_by_name"] = {
                t: {
                    dotted(x)
                    for v in vs
                    if isinstance(v, ast.AST)
                    for x in ast.walk(v)
                    if isinstance(x, (ast.Name, ast.Attribute))
                }
                for t, vs in self.assigns.items()
            }
        return self.__dict__["_reads_by_name"]

    def flow_names(self, node: ast.AST) -> set[str]:
        """The names this value is bound to, and those bound to values built from them (a few steps)."""
        n = node
        while isinstance(self.parents.get(n), (ast.Attribute, ast.Subscript)) or (
            isinstance(p := self.parents.get(n), ast.Call) and p.func is n
        ):
            n = self.parents[n]  # tok(...).to(device), tok(...)["input_ids"]
        a = self.parents.get(n)
        names = (
            {dotted(t) for t in a.targets}
            if isinstance(a, ast.Assign)
            else ({dotted(a.target)} if isinstance(a, (ast.AnnAssign, ast.NamedExpr)) else set())
        )
        names.discard("")
        reads = self._reads()
        for _ in range(3):
            grown = {t for t, r in reads.items() if t not in names and not r.isdisjoint(names)}
            if not grown:
                break
            names |= grown
        return names

    def is_sink(self, c: ast.Call) -> bool:
        return (
            c in self.generates
            or c in self.thread_generates
            or self.is_pipeline_call(c)
            or self.is_tokenizer_call(c)
            or (method(c) in ("encode", "apply_chat_template") and self.is_tokenizer(receiver(c)))
        )

    def is_tokenizer_call(self, c: ast.Call) -> bool:
        """`tok(text, ...)`: the tokenizer (or processor) itself called."""
        return isinstance(c.func, (ast.Name, ast.Attribute)) and self.is_tokenizer(c.func)

    def is_pipeline_call(self, c: ast.Call) -> bool:
        return isinstance(c.func, (ast.Name, ast.Attribute)) and any(o in self.pipelines for o in self.origins(c.func))

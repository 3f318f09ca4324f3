"""The technique catalog: one module per family, every technique registered under its public id."""

from infertune.techniques import (  # noqa: F401  (imported for their @register: the catalog fills itself)
    attention,
    batching,
    checkpoint,
    compile,
    dtype,
    kv_cache,
    parallel,
    placement,
    quantization,
    serving,
    upgrade,
)
from infertune.techniques.base import CATEGORIES, QUANTIZATIONS, REGISTRY, Check, Facts, Setup, Technique

__all__ = ["CATEGORIES", "QUANTIZATIONS", "REGISTRY", "Check", "Facts", "Setup", "Technique"]

"""Installed versions of the libraries that decide which optimizations can run (read, never imported)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

# Distribution names as pip knows them.
LIBRARIES = (
    "torch",
    "transformers",
    "accelerate",
    "bitsandbytes",
    "flash-attn",
    "flash-attn-3",
    "kernels",
    "optimum-quanto",
    "torchao",
    "gguf",
    "safetensors",
    "huggingface_hub",
)


def library_versions(names: tuple[str, ...] = LIBRARIES) -> dict[str, str | None]:
    """`{distribution: version or None when not installed}`."""
    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found

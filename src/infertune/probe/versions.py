"""Installed versions of the libraries that decide which optimizations can run (read, never imported)."""

from __future__ import annotations

import os

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
    from importlib.metadata import PackageNotFoundError, version  # 40 ms: not on the warm estimate's path

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def own_version() -> str:
    """infertune's own version from its package metadata ("0.0.0+unknown" in a source tree never installed)."""
    return library_versions(("infertune",))["infertune"] or "0.0.0+unknown"


def torch_version_file() -> str:
    """torch's installed version file (path, size, modification time), found without importing torch or
    reading package metadata: a fingerprint of the torch a cached measurement was taken with."""
    from importlib.util import find_spec

    try:
        spec = find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return "torch=none"
    path = os.path.join(spec.submodule_search_locations[0], "version.py")
    try:
        st = os.stat(path)
    except OSError:
        return f"torch={path}?"
    return f"torch={path}:{st.st_size}:{st.st_mtime_ns}"

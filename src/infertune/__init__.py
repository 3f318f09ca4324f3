"""infertune: pick, prove and ship the right inference optimization for a Transformers workload."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("infertune")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]

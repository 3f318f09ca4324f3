"""infertune: pick, prove and ship the right inference optimization for a Transformers workload.

The Python API (docs/api.md) is `infertune.env()`, `.estimate(...)`, `.advise(...)`, `.measure(...)`,
`.tune(...)`, `.doctor(...)` and `.report(run_dir)`, defined in `infertune.api`. Most of those names are
also infertune's own subpackages (`infertune.estimate` holds the estimator): read through this package,
those modules are callable and forward the call to the API function, so both `infertune.estimate(...)` and
`from infertune.estimate import Estimate` work. This package is the top of the house (docs/architecture.md):
it makes the verb modules callable from above, so none of them imports anything from here.
"""

import importlib
import sys
import types
from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("infertune")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0+unknown"

VERBS = ("env", "estimate", "advise", "measure", "tune", "doctor", "report")


class _VerbModule(types.ModuleType):
    """A module that is also its API verb: calling it calls `infertune.api.<verb>`."""

    def __call__(self, *args, **kwargs):
        from infertune import api

        return getattr(api, self.__name__.rsplit(".", 1)[1])(*args, **kwargs)


class _Package(types.ModuleType):
    """This package: a verb module read from it (`infertune.estimate`, `from infertune import tune`) is made
    callable on the way out, however it was imported."""

    def __getattribute__(self, name: str):
        value = super().__getattribute__(name)
        if name in VERBS and type(value) is types.ModuleType:
            value.__class__ = _VerbModule
        return value


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name == "env":
        from infertune.api import env

        return env
    if name in VERBS:
        return importlib.import_module(f"infertune.{name}")
    raise AttributeError(f"module 'infertune' has no attribute {name!r}")


__all__ = ["__version__", *VERBS]

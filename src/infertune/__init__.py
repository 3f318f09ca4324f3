"""infertune: pick, prove and ship the right inference optimization for a Transformers workload.

The Python API (docs/api.md) is `infertune.env()`, `.estimate(...)`, `.advise(...)`, `.measure(...)`,
`.tune(...)`, `.doctor(...)`, `.report(run_dir)`, `.loadtest(url, ...)`, `.serve_trial(...)` and `.engines()`,
defined in `infertune.api`. `env`, `advise`, `tune`, `loadtest`, `serve_trial` and `engines` are the API
functions themselves. `estimate`, `measure`, `doctor` and `report` are also infertune's own
subpackages (`infertune.estimate` holds the estimator): read through this package, those modules are
callable and forward the call to the API function, so both `infertune.estimate(...)` and
`from infertune.estimate import Estimate` work. This package is the top of the house (docs/architecture.md):
it makes the verb modules callable from above, so none of them imports anything from here.
"""

from __future__ import annotations

import importlib
import sys
import types

TYPE_CHECKING = False  # typing is not imported at run time (`infertune doctor` starts in tens of ms)
if TYPE_CHECKING:
    from typing import Any

VERBS = ("env", "estimate", "advise", "measure", "tune", "doctor", "report", "loadtest", "serve_trial", "engines")
# verbs with no subpackage of their name: the API function itself
FUNCTIONS = ("env", "advise", "tune", "loadtest", "serve_trial", "engines")


class _VerbModule(types.ModuleType):
    """A module that is also its API verb: calling it calls `infertune.api.<verb>`."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from infertune import api

        return getattr(api, self.__name__.rsplit(".", 1)[1])(*args, **kwargs)


class _Package(types.ModuleType):
    """This package: a verb module read from it (`infertune.estimate`, `from infertune import tune`) is made
    callable on the way out, however it was imported."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if name in VERBS and type(value) is types.ModuleType:
            value.__class__ = _VerbModule
        return value


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from infertune.probe.versions import own_version  # lazily: 40 ms, and `doctor` must start fast

        return own_version()
    if name in FUNCTIONS:
        from infertune import api

        return getattr(api, name)
    if name in VERBS:
        return importlib.import_module(f"infertune.{name}")
    raise AttributeError(f"module 'infertune' has no attribute {name!r}")


__all__ = ["__version__", *VERBS]

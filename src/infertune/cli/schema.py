"""The JSON Schemas of every output, generated from the pydantic models into docs/schema/.

    python -m infertune.cli.schema [DIR]    # rewrite the published schemas (a test checks they are current)

The registry lives at the top of the house because it imports every output model, from the estimator up
to the API; `infertune.core.schema` (low) holds only the version the models carry.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from infertune.core.schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from pydantic import BaseModel


def models() -> dict[str, type[BaseModel]]:
    """Published name -> the pydantic model of that output."""
    from infertune.advisor.advise import Advice
    from infertune.advisor.predicted import Measurement
    from infertune.api import DoctorResult, EnvReport, EstimateSweep, SweepOutcome, TuneOutcome
    from infertune.estimate import Estimate
    from infertune.serving.loadtest import LoadTestResult
    from infertune.serving.trial import ServeTrial

    return {
        "env": EnvReport,
        "estimate": Estimate,
        "estimate-sweep": EstimateSweep,
        "advice": Advice,
        "measurement": Measurement,
        "tune": TuneOutcome,
        "sweep": SweepOutcome,
        "doctor": DoctorResult,
        "loadtest": LoadTestResult,
        "serve-trial": ServeTrial,
    }


def schemas() -> dict[str, dict]:
    out = {}
    for name, model in models().items():
        s = model.model_json_schema(mode="serialization")
        s["$id"] = f"https://infertune.dev/schema/v{SCHEMA_VERSION}/{name}.json"
        s["title"] = f"infertune {name} (schema_version {SCHEMA_VERSION})"
        out[name] = s
    return out


def write(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, s in schemas().items():
        p = folder / f"{name}.json"
        p.write_text(json.dumps(s, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        paths.append(p)
    return paths


if __name__ == "__main__":
    for p in write(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schema")):
        print(p)

"""The doctor's result as a pydantic model (the JSON shape of the API, the CLI and MCP). Imported lazily
(`infertune.doctor.DoctorResult`): the linter's fast path never loads pydantic. The API adds `advice` above."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from infertune.core.schema import SCHEMA_VERSION
from infertune.models.hub import REVISION_DOC


class Finding(BaseModel):
    """One finding, as `doctor.nodes.Finding` (a plain class on the fast path) is read into the JSON shape."""

    model_config = ConfigDict(from_attributes=True)

    path: str
    line: int
    col: int
    rule: str
    message: str
    fix: str


class DoctorResult(BaseModel):
    kind: Literal["doctor"] = "doctor"
    schema_version: str = SCHEMA_VERSION
    model_revision: str | None = Field(None, description=REVISION_DOC + " (--env --model)")
    findings: list[Finding]
    files: int = Field(description="Python files read")
    errors: list[str] = Field(default_factory=list, description="inputs that could not be read or parsed")

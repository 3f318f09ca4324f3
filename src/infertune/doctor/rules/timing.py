"""IT047: a measurement of generation that times its first call: the clock starts, the model generates for the first
time since it was loaded, the clock stops. That first call pays CUDA context and kernel set-up, the allocator's
growth and lazy initialisation, so the figure overstates latency (doctor-real-9 m06, doctor-real-10 b10: both
labelled `other:timing-without-warmup`)."""

from __future__ import annotations

from infertune.doctor import syntax as ast
from infertune.doctor.nodes import LOOPS, dotted, receiver
from infertune.doctor.rules.context import TIMERS
from infertune.doctor.rules.serving import is_route
from infertune.doctor.script import Script


def _clock_reads(s: Script, scope: ast.AST) -> list[ast.Call]:
    return [c for c in ast.walk(scope) if isinstance(c, ast.Call) and dotted(c.func) in TIMERS]


def _generations(s: Script) -> list[ast.Call]:
    runs = [c for c in s.calls if c in s.generates or s.is_pipeline_call(c)]
    return sorted(runs, key=lambda c: (c.lineno, c.col_offset))


def _source(s: Script, run: ast.Call) -> list[ast.Call]:
    """What this call runs: the model loads (or the pipeline) behind it."""
    target = receiver(run) if run in s.generates else run.func
    return [o for o in s.origins(target) if o in s.loads or o in s.pipelines]


def _in_loop(s: Script, node: ast.AST, stop: ast.AST | None) -> bool:
    while node in s.parents and node is not stop:
        node = s.parents[node]
        if isinstance(node, LOOPS):
            return True
    return False


def cold_timing(s: Script):
    runs = _generations(s)
    for run in runs:
        scope = s.enclosing_function(run) or s.tree
        clocks = _clock_reads(s, scope)
        before = [c for c in clocks if c.lineno < run.lineno]
        after = [c for c in clocks if c.lineno > getattr(s.statement(run), "end_lineno", run.lineno)]
        if not before or not after:
            continue  # not between two clock reads
        sources = _source(s, run)
        if not sources:
            continue
        load = max(sources, key=lambda o: o.lineno)
        if load.lineno > run.lineno or (_in_loop(s, run, s.statement(load)) and not _in_loop(s, load, None)):
            continue  # a timed call repeated in a loop of its own: only its first pass is cold
        fn = s.enclosing_function(run)
        if fn is not None and (is_route(fn) or not s.call_sites(fn)):
            continue  # a handler timing each request (only the first is cold), or called from elsewhere
        warm = [
            r
            for r in runs
            if r is not run and load.lineno <= r.lineno < run.lineno and set(_source(s, r)) & set(sources)
        ]
        if not warm:
            yield (
                run,
                "the clock times the model's first generation since its load: CUDA set-up, kernel selection and the "
                "allocator's growth land in the figure; run one untimed call first (a warm-up)",
            )

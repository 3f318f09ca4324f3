"""The `infertune` command: a thin typer app over the API (parse the flags, call `infertune.api`, print).

One module per verb family; everything printed is rendered in `output`; `app` holds the typer app, the
shared options and `main` (exit codes: 0 done, 2 bad input, 1 internal error). The verbs are registered
here, in the order `infertune --help` lists them.
"""

from infertune.cli import doctor, machine, measure, plan, serving, tune
from infertune.cli.app import app, engines_app, main, models_app

app.command()(machine.env)
models_app.command("prepare")(machine.models_prepare)
models_app.command("list")(machine.models_list)
app.command()(machine.profile)
app.command()(measure.measure)
app.command()(plan.estimate)
app.command()(plan.advise)
app.command()(tune.tune)
app.command()(tune.demo)
app.command()(serving.loadtest)
app.command()(doctor.doctor)
app.command()(tune.report)
app.command()(serving.mcp)
app.command("serve-trial")(serving.serve_trial)
engines_app.command("install")(serving.engines_install)
engines_app.command("list")(serving.engines_list)

__all__ = ["app", "main"]

"""The measured loop (docs/tuning.md): `run` holds the records (what was asked, each finished step, the run
directory), `verdict` decides a step from its interleaved pairs, `loop` measures one change at a time, and
`serve_stage` serves the accepted setup under load. The loop and the serve stage are siblings: both write
the run's records and neither imports the other."""

"""The advisor, in the order it runs: `intake` (flags and host into facts), `diagnose` (where it hurts),
`moves` (each one-knob change estimated before and after, and ranked), `advise` (one change proposed as
`next`, with its configuration and the command that validates it). `predicted` is the estimate for a
measured trial's exact shape. Everything numeric here is an estimate (docs/advisor.md)."""

"""Reports people and programs read: a tune run's (`tune_report`: report.json, report.md, report.html, read
top-down from the verdict) and a load test's (`load`). `build` and `write` are the tune report's."""

from infertune.report.tune_report import build, write

__all__ = ["build", "write"]

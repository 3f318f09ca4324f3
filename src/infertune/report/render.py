"""What every report page shares: matplotlib off-screen, figures as embedded PNGs, one self-contained page."""

from __future__ import annotations

import base64
import html
import io


def pyplot():
    """matplotlib.pyplot on the Agg backend: no display needed, nothing opened on screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png(fig) -> str:
    """The figure as base64 PNG, closed afterwards."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    pyplot().close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def html_page(title: str, figures: list[tuple[str, str]], markdown: str) -> str:
    """One self-contained page: the figures (embedded), then the markdown report as text."""
    figs = "".join(f"<h3>{html.escape(t)}</h3><img src='data:image/png;base64,{b}'/>" for t, b in figures)
    return (f"<!doctype html><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;max-width:980px;margin:auto}pre{background:#f4f4f4;padding:8px;"
            "overflow-x:auto}</style>" + figs + "<h2>Report</h2><pre>" + html.escape(markdown) + "</pre>")

"""What every report page shares: matplotlib off-screen with one house style, figures embedded as SVG data
URIs (crisp on screen and on paper, no network), axis helpers that keep charts honest, and one
self-contained HTML page (laptop width, printable) built from escaped parts."""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Container, Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from infertune.core.human import GiB, MiB

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# verdict colours (colour-blind safe: Okabe-Ito), shared by charts and the page
COLOURS = {
    "baseline": "#7f7f7f",
    "kept": "#009e73",
    "rejected": "#d55e00",
    "inconclusive": "#e69f00",
    "failed": "#cc79a7",
    "estimate": "#0072b2",
    "measured": "#000000",
}
SERIES = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00")


def pyplot() -> ModuleType:
    """matplotlib.pyplot on the Agg backend with the house style: no display, nothing opened on screen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.constrained_layout.use": True,  # labels, titles and legends never overlap
            "svg.fonttype": "none",  # text stays text: selectable, small, the page's font
            "svg.hashsalt": "infertune",  # the same report renders to the same bytes
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "legend.fontsize": 8,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.axisbelow": True,
        }
    )
    return plt


def svg_uri(fig: Figure) -> str:
    """The figure as an `<img>`-ready SVG data URI, closed afterwards."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    pyplot().close(fig)
    return "data:image/svg+xml;base64," + base64.b64encode(buf.getvalue()).decode()


def from_zero(ax: Axes, axis: str = "y") -> None:
    """A ratio is read from the bar's length: the value axis starts at zero."""
    if axis == "y":
        ax.set_ylim(bottom=0, top=max(ax.get_ylim()[1], 1e-9))
    else:
        ax.set_xlim(left=0, right=max(ax.get_xlim()[1], 1e-9))


def integer_ticks(ax: Axes, values: Iterable[float], axis: str = "x") -> None:
    """Counts (concurrency, requests) get whole-number ticks: the levels themselves when few."""
    from matplotlib.ticker import MaxNLocator

    vals = sorted({float(v) for v in values})
    target = ax.xaxis if axis == "x" else ax.yaxis
    if vals and all(v.is_integer() for v in vals) and len(vals) <= 12:
        target.set_ticks(vals, [f"{int(v):,}" for v in vals])
    else:
        target.set_major_locator(MaxNLocator(integer=True))


def time_scale(values: Iterable[float | None]) -> tuple[float, str]:
    """(factor, unit) to draw seconds in: ms below a second, s above."""
    vals = [v for v in values if v is not None]
    return (1.0, "s") if vals and max(vals) >= 1 else (1e3, "ms")


def size_scale(values: Iterable[float | None]) -> tuple[float, str]:
    """(divisor, unit) to draw bytes in: MiB, or GiB from 2 GiB up."""
    vals = [v for v in values if v is not None]
    return (GiB, "GiB") if vals and max(vals) >= 2 * GiB else (MiB, "MiB")


# --- the page --------------------------------------------------------------------------------------------

esc = html.escape

CSS = """
:root{--fg:#1b1f24;--mute:#57606a;--line:#d0d7de;--bg2:#f6f8fa;--est:#0072b2;--ok:#009e73;--bad:#d55e00;
--warn:#e69f00;--fail:#cc79a7}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);
max-width:1040px;margin:0 auto;padding:24px 20px 64px}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.25em;margin:32px 0 8px;padding-bottom:4px;
border-bottom:1px solid var(--line)}h3{font-size:1.05em;margin:20px 0 6px}
.sub{color:var(--mute);margin:0 0 16px}
.verdict{border:2px solid var(--ok);border-radius:8px;padding:14px 18px;margin:16px 0;background:#f3fbf8}
.verdict.keep{border-color:var(--mute);background:var(--bg2)}
.verdict h2{margin-top:0}.verdict .headline{font-size:1.15em;font-weight:600;margin:0 0 8px}
.sure{display:inline-block;padding:1px 8px;border-radius:10px;font-size:.85em;font-weight:600;color:#fff}
.sure.high{background:var(--ok)}.sure.moderate{background:var(--warn)}.sure.low{background:var(--bad)}
.table-wrap{max-width:100%;overflow-x:auto}
table{border-collapse:collapse;margin:8px 0;font-size:.88em}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--bg2);font-weight:600}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.why{min-width:11em;overflow-wrap:anywhere}td.step{min-width:10em}
th.num{white-space:normal}
.est .tag{font-style:normal}
.tag{display:inline-block;padding:0 6px;border-radius:4px;font-size:.8em;font-weight:600;color:#fff;white-space:nowrap}
.tag.baseline{background:#7f7f7f}.tag.kept{background:var(--ok)}.tag.rejected{background:var(--bad)}
.tag.inconclusive{background:var(--warn)}.tag.failed{background:var(--fail)}
.tag.measured{background:#24292f}.tag.estimate{background:var(--est)}
.est{color:var(--est);font-style:italic}
td.est,th.est{background:#eef6fc}
.better{color:var(--ok);font-weight:600}.worse{color:var(--bad);font-weight:600}
figure{margin:16px 0 24px;break-inside:avoid}
figure img{display:block;max-width:100%;height:auto}
figcaption{color:var(--mute);font-size:.9em;margin-top:4px}
.code{position:relative;margin:8px 0 16px;break-inside:avoid}
.code pre{background:var(--bg2);border:1px solid var(--line);border-radius:6px;padding:10px 12px;margin:0;
white-space:pre-wrap;overflow-wrap:anywhere;font:13px/1.45 ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
.code button{position:absolute;top:6px;right:6px;font-size:12px;padding:2px 8px;border:1px solid var(--line);
border-radius:4px;background:#fff;cursor:pointer}
code{font:.92em ui-monospace,"DejaVu Sans Mono",Menlo,monospace;overflow-wrap:anywhere}
ul{padding-left:1.3em}li{margin:2px 0;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:8px 0}dt{color:var(--mute)}
dd{margin:0;overflow-wrap:anywhere}
.legend{color:var(--mute);font-size:.9em}
@media print{body{max-width:none;padding:0;font-size:11pt}.code button{display:none}
h2{break-after:avoid}.verdict{background:none}a{color:inherit}}
"""

COPY_JS = (
    "document.querySelectorAll('.code button').forEach(b=>b.addEventListener('click',()=>{"
    "navigator.clipboard.writeText(b.nextElementSibling.innerText).then(()=>{b.textContent='copied';"
    "setTimeout(()=>b.textContent='copy',1500)})}));"
)


def inline(text: str) -> str:
    """Escaped text with `backticks` as code and http(s) addresses as links."""
    import re

    out = []
    for k, part in enumerate(re.split(r"`([^`]+)`", text)):
        if k % 2:
            out.append(f"<code>{esc(part)}</code>")
        else:
            out.append(
                re.sub(r"(https?://[^\s<>\"')]*[^\s<>\"').,;:])", r"<a href='\1'>\1</a>", esc(part, quote=False))
            )
    return "".join(out)


def tag(kind: str, text: str | None = None) -> str:
    return f"<span class='tag {esc(kind)}'>{esc(text or kind)}</span>"


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    num: Container[int] = frozenset(),
    est: Container[int] = frozenset(),
    raw: Container[int] = frozenset(),
    cls: dict[int, str] | None = None,
) -> str:
    """An HTML table; `num` columns right-aligned, `est` columns marked as estimates, `raw` columns are
    already HTML (everything else is escaped)."""
    cls = cls or {}

    def klass(i: int) -> str:
        c = " ".join(x for x in ("num" if i in num else "", "est" if i in est else "", cls.get(i, "")) if x)
        return f" class='{c}'" if c else ""

    head = "".join(f"<th{klass(i)}>{esc(h)}</th>" for i, h in enumerate(headers))
    body = "".join(
        "<tr>" + "".join(f"<td{klass(i)}>{c if i in raw else esc(str(c))}</td>" for i, c in enumerate(r)) + "</tr>"
        for r in rows
    )
    return f"<div class='table-wrap'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def code(text: str, title: str, lang: str = "") -> str:
    return (
        f"<h3>{esc(title)}</h3><div class='code'><button type='button'>copy</button>"
        f"<pre><code class='language-{esc(lang)}'>{esc(text.rstrip())}</code></pre></div>"
    )


def figure(title: str, uri: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f"<figure class='chart'><h3>{esc(title)}</h3><img alt='{esc(title)}' src='{uri}'/>{cap}</figure>"


def bullets(items: Iterable[str], raw: bool = False) -> str:
    return "<ul>" + "".join(f"<li>{i if raw else inline(i)}</li>" for i in items) + "</ul>"


def facts(pairs: Iterable[tuple[str, str]]) -> str:
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in pairs) + "</dl>"


def document(title: str, body: str) -> str:
    """The self-contained page: no external resource of any kind."""
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body>{body}"
        f"<script>{COPY_JS}</script></body></html>"
    )

"""One self-contained HTML page: figures embedded as base64 PNG, tables inline, no network, no files.

:func:`render` takes plain values (section texts, PNG bytes, table rows) and returns the page as a
string; the caller writes it. A small inline script, run on load, records on ``<body>`` how many
images decoded (``data-images-loaded`` of ``data-images-total``), so a headless browser can check
that the page renders with no missing image.

Example:
    >>> page = render("t", [Section("S", "text", tables=[Table("x", [{"a": 1}])])], claims=[])
    >>> "<table" in page and "http" not in page.split("<body")[1]
    True
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from possym.report.rules import EMPIRICAL, NA

VERDICT_COLOURS = {"match": "#d8f0d8", "consistent": "#eef2e2", "partial": "#fff1c7", "differs": "#f6d3d3",
                   "unresolved": "#ece3f3", "uninformative": "#dde6f3", "ceiling": "#dde6f3", "verified": "#eef4ee",
                   "n/a": "#e8e8e8"}

STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1150px; margin: 2em auto; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; font-size: .85em; margin: .8em 0; }
th, td { border: 1px solid #ccc; padding: .25em .5em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } figure { margin: 1.2em 0; } figcaption { font-size: .85em; color: #555; }
img { max-width: 100%; border: 1px solid #eee; } .small { font-size: .8em; color: #555; }
code, pre { background: #f6f6f6; } pre { padding: .6em; overflow-x: auto; font-size: .8em; }
"""

CHECK_IMAGES = """
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute("data-images-loaded", ok);
  document.body.setAttribute("data-images-total", imgs.length);
});
"""


@dataclass(frozen=True)
class Fold:
    """A table cell that folds out: a one-line ``summary``, and ``lines`` of detail under it."""

    summary: str
    lines: Sequence[str] = ()


@dataclass(frozen=True)
class Image:
    caption: str
    png: bytes


@dataclass(frozen=True)
class Table:
    caption: str
    rows: Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class Section:
    title: str
    text: str = ""
    images: Sequence[Image] = field(default_factory=tuple)
    tables: Sequence[Table] = field(default_factory=tuple)
    pre: str = ""


def _cell(value: Any) -> str:
    if isinstance(value, Fold):
        items = "".join(f"<li>{html.escape(line)}</li>" for line in value.lines)
        return f"<details><summary>{html.escape(value.summary)}</summary><ul>{items}</ul></details>"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def table_html(rows: Sequence[Mapping[str, Any]], colour_key: str | None = None) -> str:
    if not rows:
        return "<p class='small'>(no rows)</p>"
    keys = list(rows[0])
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    body = []
    for row in rows:
        style = ""
        if colour_key and str(row.get(colour_key)) in VERDICT_COLOURS:
            style = f" style='background:{VERDICT_COLOURS[str(row[colour_key])]}'"
        body.append(f"<tr{style}>" + "".join(f"<td>{_cell(row.get(k, ''))}</td>" for k in keys) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def image_html(image: Image) -> str:
    data = base64.b64encode(image.png).decode("ascii")
    caption = html.escape(image.caption)
    return (
        f"<figure><img alt='{caption}' src='data:image/png;base64,{data}'><figcaption>{caption}</figcaption></figure>"
    )


def render(title: str, sections: Sequence[Section], claims: Sequence[Mapping[str, Any]], intro: str = "") -> str:
    """The whole page: title, intro, the claims table (coloured by verdict), then each section. The tally counts
    only the claims this run could grade; the n/a ones (another preset, missing evidence) and the verifications
    (a row whose ``kind`` is "verification") are counted apart."""
    parts = [f"<h1>{html.escape(title)}</h1>", f"<p id='intro'>{intro}</p>" if intro else ""]
    if claims:
        results = [c for c in claims if c.get("kind", "empirical") != "verification"]
        graded = [c for c in results if c["verdict"] != NA]
        tally = {v: sum(1 for c in graded if c["verdict"] == v) for v in EMPIRICAL}
        summary = ", ".join(f"{n} {v}" for v, n in tally.items() if n) or "none"
        not_here = len(results) - len(graded)
        checks = len(claims) - len(results)
        parts.append(f"<h2 id='claims'>Claims this run can grade ({len(graded)}): {summary}</h2>"
                     f"<p class='small'>{not_here} n/a here (another preset, or evidence this run did not make)"
                     + (f"; {checks} verifications of our code or of a formula" if checks else "") + ".</p>")
        parts.append(table_html([{k: v for k, v in c.items() if k != "kind"} for c in claims], colour_key="verdict"))
    for s in sections:
        parts.append(f"<h2>{html.escape(s.title)}</h2>")
        if s.text:
            parts.append(f"<p>{s.text}</p>")
        parts += [image_html(i) for i in s.images]
        for t in s.tables:
            parts.append(f"<p class='small'>{html.escape(t.caption)}</p>{table_html(t.rows)}")
        if s.pre:
            parts.append(f"<pre>{html.escape(s.pre)}</pre>")
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style><script>{CHECK_IMAGES}</script></head>"
        f"<body>{''.join(parts)}</body></html>\n"
    )

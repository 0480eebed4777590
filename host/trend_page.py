"""`orchestrate.py history report --out DIR`: the run history as one static page, as `asv
publish` makes one: DIR/index.html, grouped by machine class, one plot per configuration, part
and metric over its runs (x: the runs in date order, labelled by commit and date), each run its
median with its interval (the range of its repeats below 6, else a 95 % bootstrap interval),
change points drawn as dashed lines, and a table of the runs under the plot.

Offline: every plot is inline SVG (matplotlib), no script, no font or file from anywhere;
a Content-Security-Policy forbids scripts and remote loads. Every string from the store (a
label, a commit, a configuration: untrusted) is HTML-escaped.
"""

from __future__ import annotations

import html
import io
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # an annotation only: host.history imports this module to render
    from host.history import Series

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


def _svg(s: Series) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.core import palette
    from bench.core.text import plot_text

    plt.rcParams["svg.fonttype"] = "none"
    xs = list(range(len(s.points)))
    med = [p.median for p in s.points]
    lo = [p.median - (p.lo if p.lo is not None else p.median) for p in s.points]
    hi = [(p.hi if p.hi is not None else p.median) - p.median for p in s.points]
    fig, ax = plt.subplots(figsize=(7.5, 2.6), dpi=72)
    colour = palette.SHADES[palette.family(s.machine.split(" (")[0], s.part)][0]  # CPUs blue, NVIDIA green, Apple purple
    ax.errorbar(xs, med, yerr=[lo, hi], fmt="o-", ms=4, lw=1, capsize=3, color=colour)
    for i in s.change_points:
        ax.axvline(i - 0.5, color="#c0392b", ls="--", lw=1.2)
    # every label from the store is untrusted text: plot_text, never mathtext (a commit `$\x$` failed the page)
    ax.set_ylabel(plot_text(f"{s.metric} ({s.unit})"), fontsize=8)
    ticks = [f"{plot_text(p.commit[:7])}\n{plot_text(p.date[:10])}" for p in s.points]
    step = max(1, -(-len(xs) // 8))  # at most 8 labels: a commit and a date each
    ax.set_xticks(xs[::step], ticks[::step], fontsize=7)
    ax.tick_params(axis="y", labelsize=7)
    ax.margins(x=0.05)
    ax.grid(axis="y", lw=0.3)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _runs_table(s: Series) -> str:
    e = html.escape
    head = "<tr><th>run</th><th>date (UTC)</th><th>commit</th><th>environment</th><th>repeats</th><th>median</th><th>interval</th></tr>"
    body = []
    for i, p in enumerate(s.points):
        iv = "-" if p.lo is None else f"{p.lo:.4g}-{p.hi:.4g} ({'95% CI' if p.kind == 'ci' else 'range'})"
        mark = ' class="cp"' if i in s.change_points else ""
        body.append(
            f"<tr{mark}><td>{e(p.label)}</td><td>{e(p.date)}</td><td><code>{e(p.commit[:12])}</code></td><td>{e(p.env)}</td>"
            f"<td>{len(p.values)}</td><td>{p.median:.4g}</td><td>{e(iv)}</td></tr>"
        )
    return f"<table>{head}{''.join(body)}</table>"


def render(all_series: list[Series], store: str) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        "<title>cnn-bench run history</title><style>",
        "body{font-family:sans-serif;max-width:60em;margin:1em auto;padding:0 1em}"
        "table{border-collapse:collapse;font-size:80%;margin:.3em 0 1.5em}td,th{border:1px solid #ccc;padding:2px 6px}"
        "tr.cp td{background:#fdecea}h3{font-size:100%;margin-bottom:.2em}.note{color:#555;font-size:85%}",
        "</style></head><body>",
        "<h1>Run history</h1>",
        f"<p class='note'>From <code>{e(store)}</code>: {len(all_series)} series. Each point is one run: the median of its "
        "repeats, with the range of the repeats (below 6) or a 95% bootstrap interval; dashed red lines are change "
        "points (E-Divisive means, signal-processing-algorithms), and their rows are shaded. Made by "
        "<code>orchestrate.py history report</code>.</p>",
    ]
    machines = list(dict.fromkeys(s.machine for s in all_series))
    parts.append("<ul>" + "".join(f"<li><a href='#m{i}'>{e(m)}</a></li>" for i, m in enumerate(machines)) + "</ul>")
    for i, m in enumerate(machines):
        parts.append(f"<h2 id='m{i}'>Machine class: {e(m)}</h2>")
        for s in (x for x in all_series if x.machine == m):
            steps = s.steps()
            cp = "; ".join(f"{st['ratio']:.3f}x from {st['commit'][:8]} ({st['date'][:10]})" for st in steps)
            tr = s.trend()
            parts.append(f"<h3>{e(s.name)}</h3>")
            parts.append(
                "<p class='note'>"
                + e(f"{len(s.points)} run(s); trend (last / earlier median): {'-' if tr is None else f'{tr:.3f}x'}; ")
                + e(f"change points: {cp or s.change_note or 'none'}")
                + "</p>"
            )
            parts.append(_svg(s))
            parts.append(_runs_table(s))
    parts.append("</body></html>")
    return "\n".join(parts)


def write(all_series: list[Series], store: str, out: Path) -> Path:
    """OUT/index.html (temp name, then renamed)."""
    from bench.core.errors import UsageError
    from bench.core.rows import atomic_write_text

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory")
    out.mkdir(parents=True, exist_ok=True)
    path = out / "index.html"
    atomic_write_text(path, render(all_series, store))
    return path


__all__ = ["render", "write"]

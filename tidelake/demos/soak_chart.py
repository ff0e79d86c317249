"""soak.html: the soak's memory per role and its lags over time, one SVG chart each, with a
vertical line at every fault. A static page (no script), so it opens from a CI artifact.
Owner: the soak (tidelake.demos.soak).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

from tidelake.demos.soak_samples import Flatness
from tidelake.orchestration.plugin_views import PALETTE

WIDTH, HEIGHT, MARGIN = 720, 220, 40


def _points(points: Sequence[tuple[float, float]], x_max: float, y_max: float) -> str:
    return " ".join(f"{MARGIN + at / x_max * (WIDTH - 2 * MARGIN):.1f},"
                    f"{HEIGHT - MARGIN - value / y_max * (HEIGHT - 2 * MARGIN):.1f}" for at, value in points)


def chart(title: str, unit: str, lines: dict[str, list[tuple[float, float]]], faults: Sequence[tuple[float, str]],
          x_max: float) -> str:
    """One SVG: `lines` (name -> (seconds, value) points) on a shared time axis, faults marked."""
    x_max = max(x_max, 1.0)
    y_max = max([v for points in lines.values() for _, v in points] + [1e-9]) * 1.05
    parts = [f'<figure><figcaption>{html.escape(title)} (max {y_max / 1.05:.1f} {html.escape(unit)})</figcaption>',
             f'<svg width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{html.escape(title)}">',
             f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" y2="{HEIGHT - MARGIN}" stroke="#9aa5b1"/>',
             f'<text x="{MARGIN}" y="{HEIGHT - MARGIN + 14}" font-size="11">0 min</text>',
             f'<text x="{WIDTH - MARGIN - 40}" y="{HEIGHT - MARGIN + 14}" font-size="11">{x_max / 60:.0f} min</text>']
    for at, name in faults:
        x = MARGIN + at / x_max * (WIDTH - 2 * MARGIN)
        parts.append(f'<line x1="{x:.1f}" y1="{MARGIN / 2}" x2="{x:.1f}" y2="{HEIGHT - MARGIN}" stroke="#d0d5db" '
                     f'stroke-dasharray="3,3"><title>{html.escape(name)} at {at / 60:.1f} min</title></line>')
    for i, (name, points) in enumerate(sorted(lines.items())):
        color = PALETTE[i % len(PALETTE)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{_points(points, x_max, y_max)}">'
                     f'<title>{html.escape(name)}</title></polyline>')
        parts.append(f'<text x="{WIDTH - MARGIN + 4}" y="{MARGIN + 12 * i}" font-size="10" fill="{color}">'
                     f'{html.escape(name)}</text>')
    parts.append("</svg></figure>")
    return "\n".join(parts)


def write_page(path: Path, lines: dict[str, list[tuple[float, float]]], faults: Sequence[tuple[float, str]],
               verdicts: Sequence[Flatness], title: str) -> Path:
    """The page: memory chart, lag chart, and the flatness table."""
    x_max = max([at for points in lines.values() for at, _ in points] + [1.0])
    memory = {name.removeprefix("pss "): pts for name, pts in lines.items() if name.startswith("pss ")}
    lags = {name: pts for name, pts in lines.items() if not name.startswith("pss ")}
    rows = "".join(
        f"<tr><td>{html.escape(v.series)}</td><td>{_num(v.settled)}</td><td>{_num(v.last)}</td>"
        f"<td>{('flat' if v.flat else 'GROWING') if v.judged else 'holds the data: not judged'}</td></tr>"
        for v in verdicts)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title></head><body>"
            f"<h1>{html.escape(title)}</h1>"
            + chart("memory per role (PSS)", "MiB", memory, faults, x_max)
            + chart("lag", "s", lags, faults, x_max)
            + "<table><tr><th>series</th><th>median, 2nd quarter</th><th>median, last quarter</th><th></th></tr>"
            + rows + "</table></body></html>")
    path.write_text(page)
    return path


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"

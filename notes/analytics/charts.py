"""The app's one charting approach: small server-rendered SVG charts (pure, no dependency).

Every chart is an accessible <svg role="img"> with a <title> and <desc>, shown beside (or
above) an HTML table of the same numbers, so pages work without JavaScript and for screen
readers. All text is escaped here; callers mark the returned markup safe.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#4a5568")
FONT = 'font-family="system-ui, sans-serif" font-size="11"'


@dataclass(frozen=True)
class Series:
    name: str
    values: Sequence[float | None]


def _nice_max(value: float) -> float:
    """A round axis maximum >= value (1, 2, 2.5 or 5 times a power of ten)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power


# Widest advance of an 11 px system-ui character, in px (capitals and "w"): label room is sized
# with it, so a label is never cut by the edge of the SVG.
CHAR_W = 7.0


def _text_w(text: str) -> float:
    return CHAR_W * len(text)


def _fmt(value: float) -> str:
    """A count prints as a count ("13", not "13.0"); other values with 2-3 significant digits."""
    if float(value).is_integer():
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}".rstrip("0").rstrip(".") if value else "0"


def _open(title: str, description: str, width: int, height: int) -> list[str]:
    slug = "".join(c if c.isalnum() else "-" for c in title.lower())[:40]
    return [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="t-{slug} d-{slug}">',
        f'<title id="t-{slug}">{escape(title)}</title><desc id="d-{slug}">{escape(description)}</desc>',
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
    ]


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    *,
    unit: str = "",
    description: str = "",
    width: int = 560,
) -> str:
    """Horizontal grouped bars: one group per category, one bar per series. None values are
    drawn as "no data"."""
    # The category labels get the room their longest one needs (never cut), the plot keeps its width.
    left = max(170, math.ceil(_text_w(max(categories, key=len, default="")) + 14))
    width += left - 170
    right, top, bar_h, gap = 60, 28, 14, 10
    group_h = bar_h * len(series) + gap
    legend_h = 18 if len(series) > 1 else 0
    height = top + legend_h + group_h * len(categories) + 24
    known = [v for s in series for v in s.values if v is not None]
    vmax = _nice_max(max(known, default=0.0))
    plot_w = width - left - right
    out = _open(title, description or title, width, height)
    out.append(f'<text x="8" y="16" {FONT} font-weight="bold">{escape(title)}</text>')
    y0 = top
    if len(series) > 1:
        x: float = left
        for i, s in enumerate(series):
            out.append(f'<rect x="{x}" y="{y0}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>')
            out.append(f'<text x="{x + 14}" y="{y0 + 9}" {FONT}>{escape(s.name)}</text>')
            x += 24 + _text_w(s.name)
        y0 += legend_h
    for c, category in enumerate(categories):
        gy = y0 + c * group_h
        out.append(
            f'<text x="{left - 6}" y="{gy + group_h / 2 + 2:.1f}" text-anchor="end" {FONT}>{escape(category)}</text>'
        )
        for i, s in enumerate(series):
            v = s.values[c]
            by = gy + i * bar_h
            if v is None:
                out.append(f'<text x="{left + 4}" y="{by + bar_h - 3}" {FONT} fill="#777">no data</text>')
                continue
            w = max(plot_w * max(v, 0.0) / vmax, 0.5)
            colour = PALETTE[i % len(PALETTE)]
            out.append(
                f'<rect x="{left}" y="{by}" width="{w:.1f}" height="{bar_h - 2}" fill="{colour}">'
                f"<title>{escape(s.name)} · {escape(category)}: {escape(_fmt(v))}{escape(unit)}</title></rect>"
            )
            out.append(
                f'<text x="{left + w + 4:.1f}" y="{by + bar_h - 4}" {FONT}>{escape(_fmt(v))}{escape(unit)}</text>'
            )
    axis_y = y0 + group_h * len(categories)
    out.append(f'<line x1="{left}" y1="{y0}" x2="{left}" y2="{axis_y}" stroke="#333"/>')
    out.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + plot_w}" y2="{axis_y}" stroke="#333"/>')
    for k in range(5):
        tick = vmax * k / 4
        x = left + plot_w * k / 4
        out.append(f'<text x="{x:.1f}" y="{axis_y + 14}" text-anchor="middle" {FONT}>{escape(_fmt(tick))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def time_series_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    *,
    lines: Sequence[Series] = (),
    marked: Sequence[int] = (),
    description: str = "",
    width: int = 720,
    height: int = 260,
) -> str:
    """Daily values as a line, optional reference lines (e.g. rolling mean, threshold; None
    where undefined) and marked points (e.g. spikes) as red circles. `labels` name the x
    positions (dates); about eight are printed."""
    left, right, top, bottom = 48, 16, 28, 40
    n = len(values)
    refs = [v for s in lines for v in s.values if v is not None]
    vmax = _nice_max(max([*values, *refs], default=0.0))
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(i: int) -> float:
        return left + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def py(v: float) -> float:
        return top + plot_h - plot_h * max(v, 0.0) / vmax

    out = _open(title, description or title, width, height)
    out.append(f'<text x="8" y="16" {FONT} font-weight="bold">{escape(title)}</text>')
    for k in range(5):
        tick = vmax * k / 4
        y = py(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#e2e2e2"/>')
        out.append(f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" {FONT}>{escape(_fmt(tick))}</text>')
    if n:
        step = max(1, math.ceil(n / 8))
        for i in range(0, n, step):
            out.append(
                f'<text x="{px(i):.1f}" y="{top + plot_h + 16}" text-anchor="middle" {FONT}>{escape(labels[i])}</text>'
            )
        points = " ".join(f"{px(i):.1f},{py(v):.1f}" for i, v in enumerate(values))
        out.append(f'<polyline points="{points}" fill="none" stroke="{PALETTE[0]}" stroke-width="1.5"/>')
    for j, s in enumerate(lines):
        segment: list[str] = []
        segments: list[list[str]] = []
        for i, v in enumerate(s.values):
            if v is None:
                if segment:
                    segments.append(segment)
                segment = []
            else:
                segment.append(f"{px(i):.1f},{py(v):.1f}")
        if segment:
            segments.append(segment)
        colour = PALETTE[(j + 1) % len(PALETTE)]
        dash = ' stroke-dasharray="4 3"' if j else ""
        for seg in segments:
            out.append(f'<polyline points="{" ".join(seg)}" fill="none" stroke="{colour}" stroke-width="1"{dash}/>')
        lx = left + 8 + 150 * j
        out.append(f'<line x1="{lx}" y1="{height - 8}" x2="{lx + 18}" y2="{height - 8}" stroke="{colour}"{dash}/>')
        out.append(f'<text x="{lx + 22}" y="{height - 5}" {FONT}>{escape(s.name)}</text>')
    for i in marked:
        out.append(
            f'<circle cx="{px(i):.1f}" cy="{py(values[i]):.1f}" r="4" fill="#c53030">'
            f"<title>spike {escape(labels[i])}: {escape(_fmt(values[i]))}</title></circle>"
        )
    out.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>')
    out.append("</svg>")
    return "\n".join(out)

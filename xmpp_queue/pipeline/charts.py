"""Inline SVG charts for ``report.html``: plain Python, no JavaScript, no fetches.

Why hand-made: the report must open from a file on a machine with no network
and no plotting library installed, and mail as one attachment. Three shapes
cover it: lines over time (throughput, backlog), grouped vertical bars (latency
percentiles per node, on a logarithmic scale: a handling time of milliseconds
must stay visible next to a wait of minutes), horizontal bars (per worker). Each
mark carries a ``<title>`` so hovering shows the exact value; a series may be
dashed, so that one equal to another (acked over delivered) does not hide it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#2b6cb0", "#2f855a", "#c05621", "#9b2c2c", "#6b46c1", "#2c7a7b", "#975a16")
FAMILY = "font-family='system-ui, sans-serif'"
FONT = f"{FAMILY} font-size='11'"


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    values: Sequence[float | None]
    color: str = PALETTE[0]
    dash: str = ""  # an SVG stroke-dasharray ("5 3"); "" draws a solid line


@dataclass(frozen=True, slots=True)
class _Frame:
    width: int
    height: int
    left: int = 56
    right: int = 12
    top: int = 44  # title, then the legend, then the plot
    bottom: int = 36

    @property
    def plot_w(self) -> float:
        return self.width - self.left - self.right

    @property
    def plot_h(self) -> float:
        return self.height - self.top - self.bottom


def nice_ticks(maximum: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least *maximum* (steps of 1, 2 or 5 x 10^k)."""
    if not math.isfinite(maximum) or maximum <= 0:
        return [0.0, 1.0]
    raw = maximum / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    ticks = [0.0]
    while ticks[-1] < maximum:
        ticks.append(round(ticks[-1] + step, 10))
    return ticks


def log_ticks(values: Sequence[float]) -> list[float]:
    """Powers of ten from a decade below the smallest positive value to at or above
    the largest: the ticks of a logarithmic axis. The decade below gives the smallest
    bar a decade's height at least, so no value is drawn as nothing."""
    positive = [v for v in values if math.isfinite(v) and v > 0]
    if not positive:
        return [1.0, 10.0]
    low = math.floor(math.log10(min(positive))) - 1
    high = max(math.ceil(math.log10(max(positive))), low + 1)
    return [10.0**k for k in range(low, high + 1)]


def format_number(value: float) -> str:
    """Short human form: 1234 -> 1.2k, 0.0123 -> 0.012."""
    magnitude = abs(value)
    if magnitude >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if magnitude >= 1_000:
        return f"{value / 1_000:.3g}k"
    if magnitude == 0 or magnitude >= 1:
        return f"{value:.3g}"
    return f"{value:.2g}"


def _open(title: str, frame: _Frame) -> list[str]:
    return [
        f"<svg class='chart' viewBox='0 0 {frame.width} {frame.height}' width='{frame.width}' "
        f"height='{frame.height}' role='img' aria-label='{escape(title, quote=True)}'>",
        f"<title>{escape(title)}</title>",
        f"<text x='{frame.left}' y='16' {FAMILY} font-size='13' font-weight='600'>"
        f"{escape(title)}</text>",
    ]


def _linear(ticks: Sequence[float]) -> Callable[[float], float]:
    """Where a value sits on an axis from 0 to the last tick, as a fraction of it."""
    top = ticks[-1] or 1.0
    return lambda v: v / top


def _logarithmic(ticks: Sequence[float]) -> Callable[[float], float]:
    """The same for an axis of powers of ten; values at or below the first tick sit
    on the axis (a bar of no height, still hoverable)."""
    low, high = math.log10(ticks[0]), math.log10(ticks[-1])
    return lambda v: 0.0 if v <= ticks[0] else (math.log10(v) - low) / (high - low)


def _y_axis(
    frame: _Frame,
    ticks: Sequence[float],
    unit: str,
    at: Callable[[float], float] | None = None,
) -> list[str]:
    at = at or _linear(ticks)
    parts = []
    for tick in ticks:
        y = frame.top + frame.plot_h * (1 - at(tick))
        parts.append(
            f"<line x1='{frame.left}' x2='{frame.left + frame.plot_w}' y1='{y:.1f}' "
            f"y2='{y:.1f}' stroke='#e2e8f0'/>"
            f"<text x='{frame.left - 6}' y='{y + 4:.1f}' text-anchor='end' {FONT} "
            f"fill='#4a5568'>{format_number(tick)}</text>"
        )
    if unit:
        parts.append(
            f"<text x='12' y='{frame.top + frame.plot_h / 2:.1f}' {FONT} fill='#4a5568' "
            f"transform='rotate(-90 12 {frame.top + frame.plot_h / 2:.1f})' "
            f"text-anchor='middle'>{escape(unit)}</text>"
        )
    return parts


def _legend(frame: _Frame, series: Sequence[Series]) -> list[str]:
    """One row of colour keys under the title, left to right (a dashed series is
    keyed by a dashed stroke)."""
    parts = []
    x = float(frame.left)
    for s in series:
        key = (
            f"<line x1='{x:.0f}' x2='{x + 10:.0f}' y1='29' y2='29' stroke='{s.color}' "
            f"stroke-width='2.5' stroke-dasharray='3 2'/>"
            if s.dash
            else f"<rect x='{x:.0f}' y='24' width='10' height='10' fill='{s.color}'/>"
        )
        parts.append(key + f"<text x='{x + 13:.0f}' y='33' {FONT}>{escape(s.name)}</text>")
        x += 22 + 6.5 * len(s.name)
    return parts


def line_chart(
    title: str,
    x_labels: Sequence[str],
    series: Sequence[Series],
    unit: str = "",
    width: int = 640,
    height: int = 220,
    fill: bool = False,
) -> str:
    """Lines over an evenly spaced x axis (time buckets); *fill* shades under them."""
    frame = _Frame(width, height)
    values = [v for s in series for v in s.values if v is not None]
    ticks = nice_ticks(max(values, default=0.0))
    top = ticks[-1] or 1.0
    n = max(len(x_labels), 1)
    step = frame.plot_w / max(n - 1, 1)

    def point(i: int, v: float) -> tuple[float, float]:
        return frame.left + i * step, frame.top + frame.plot_h * (1 - v / top)

    parts = _open(title, frame) + _y_axis(frame, ticks, unit)
    every = max(1, math.ceil(n / 6))
    shown = None
    for i in range(0, n, every):
        label = x_labels[i] if x_labels else ""
        if label == shown:
            continue  # never the same label twice in a row
        shown = label
        x = frame.left + i * step
        # The first label starts at the axis and the last ends at the edge: none is cut.
        anchor = "start" if i == 0 else "end" if i + every >= n and n > 1 else "middle"
        parts.append(
            f"<text x='{x:.1f}' y='{frame.height - 14}' text-anchor='{anchor}' {FONT} "
            f"fill='#4a5568'>{escape(label)}</text>"
        )
    for s in series:
        points = [point(i, v) for i, v in enumerate(s.values) if v is not None]
        if not points:
            continue
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        if fill:
            base = frame.top + frame.plot_h
            parts.append(
                f"<polygon points='{points[0][0]:.1f},{base:.1f} {path} "
                f"{points[-1][0]:.1f},{base:.1f}' fill='{s.color}' fill-opacity='0.18'/>"
            )
        dash = f" stroke-dasharray='{s.dash}'" if s.dash else ""
        parts.append(
            f"<polyline class='series' points='{path}' fill='none' stroke='{s.color}' "
            f"stroke-width='1.8'{dash}><title>{escape(s.name)}</title></polyline>"
        )
        if len(points) <= 60:
            for (x, y), (i, v) in zip(
                points, [(i, v) for i, v in enumerate(s.values) if v is not None], strict=True
            ):
                label = f"{s.name} {x_labels[i] if x_labels else i}: {format_number(v)}"
                parts.append(
                    f"<circle cx='{x:.1f}' cy='{y:.1f}' r='2.5' fill='{s.color}'>"
                    f"<title>{escape(label)}</title></circle>"
                )
    parts += _legend(frame, series)
    parts.append("</svg>")
    return "".join(parts)


def grouped_bar_chart(
    title: str,
    groups: Sequence[str],
    series: Sequence[Series],
    unit: str = "",
    width: int = 640,
    height: int = 240,
    log_scale: bool = False,
) -> str:
    """Vertical bars: one cluster per group, one bar per series inside it. With
    *log_scale* the axis runs over powers of ten (values of different magnitudes
    side by side)."""
    frame = _Frame(width, height)
    values = [v for s in series for v in s.values if v is not None]
    ticks = log_ticks(values) if log_scale else nice_ticks(max(values, default=0.0))
    at = _logarithmic(ticks) if log_scale else _linear(ticks)
    parts = _open(title, frame) + _y_axis(frame, ticks, unit, at)
    slot = frame.plot_w / max(len(groups), 1)
    bar = slot * 0.8 / max(len(series), 1)
    for g, group in enumerate(groups):
        x0 = frame.left + g * slot + slot * 0.1
        parts.append(
            f"<text x='{x0 + slot * 0.4:.1f}' y='{frame.height - 14}' text-anchor='middle' "
            f"{FONT} fill='#4a5568'>{escape(_clip(group, int(slot / 6)))}</text>"
        )
        for s_i, s in enumerate(series):
            v = s.values[g]
            if v is None:
                continue
            h = frame.plot_h * at(v)
            y = frame.top + frame.plot_h - h
            parts.append(
                f"<rect class='bar' x='{x0 + s_i * bar:.1f}' y='{y:.1f}' "
                f"width='{max(bar - 1, 1):.1f}' height='{h:.1f}' fill='{s.color}'>"
                f"<title>{escape(f'{group} {s.name}: {format_number(v)} {unit}')}</title></rect>"
            )
    parts += _legend(frame, series)
    parts.append("</svg>")
    return "".join(parts)


def horizontal_bar_chart(
    title: str,
    labels: Sequence[str],
    values: Sequence[float],
    notes: Sequence[str] = (),
    color: str = PALETTE[0],
    width: int = 640,
    row_height: int = 20,
) -> str:
    """One bar per label (workers), longest first as given, with a note at its end."""
    label_w = min(220, 7 * max((len(label) for label in labels), default=4) + 12)
    frame = _Frame(width, 40 + row_height * max(len(labels), 1), left=label_w, right=190, top=28)
    top = max(values, default=0.0) or 1.0
    parts = _open(title, frame)
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = frame.top + i * row_height
        w = frame.plot_w * value / top
        note = notes[i] if i < len(notes) else ""
        parts.append(
            f"<text x='{label_w - 6}' y='{y + row_height * 0.65:.1f}' text-anchor='end' {FONT}>"
            f"{escape(_clip(label, label_w // 7))}</text>"
            f"<rect class='bar' x='{label_w}' y='{y + 2}' width='{max(w, 1):.1f}' "
            f"height='{row_height - 4}' fill='{color}'>"
            f"<title>{escape(f'{label}: {format_number(value)} {note}')}</title></rect>"
            f"<text x='{label_w + w + 4:.1f}' y='{y + row_height * 0.65:.1f}' {FONT} "
            f"fill='#4a5568'>{escape(format_number(value))} {escape(note)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _clip(text: str, limit: int) -> str:
    limit = max(limit, 4)
    return text if len(text) <= limit else text[: limit - 1] + "…"

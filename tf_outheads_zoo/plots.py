"""Line plots as self-contained SVG files (no plotting library needed).

Training runs write their loss curves next to their logs; an SVG opens in any
browser and needs nothing installed.
"""

import math
from xml.sax.saxutils import escape

COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_WIDTH, _HEIGHT = 720, 420
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 40, 50


def _ticks(low, high, count=5):
    """About `count` round tick values covering [low, high]."""
    if not high > low:
        return [low]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step + 1e-9) + 1)]


def write_line_plot(path, series, title="", xlabel="", ylabel="", bands=None):
    """Writes an SVG line plot of several named series.

    Args:
        path: str, the `.svg` file to write.
        series: dict of label → `(xs, ys)`, sequences of numbers of equal length.
            Non-finite points are skipped.
        title, xlabel, ylabel: str.
        bands: optional dict of label → `(xs, lows, highs)`: a shaded band in the
            series' colour (e.g. the range over seeds around their mean).

    Raises:
        ValueError: if `series` is empty, a series' xs and ys differ in length,
            or no series has a finite point.
    """
    if not series:
        raise ValueError("`series` must hold at least one (xs, ys) pair. Received: {}")
    points = {}
    for label, (xs, ys) in series.items():
        xs, ys = list(xs), list(ys)
        if len(xs) != len(ys):
            raise ValueError(f"Series {label!r}: {len(xs)} x values but {len(ys)} y values")
        points[label] = [(float(x), float(y)) for x, y in zip(xs, ys)
                         if math.isfinite(float(x)) and math.isfinite(float(y))]
    shaded = {}
    for label, (xs, lows, highs) in (bands or {}).items():
        if label not in series:
            raise ValueError(f"Band {label!r} has no series of that label: {list(series)}")
        shaded[label] = [(float(x), float(lo), float(hi)) for x, lo, hi in zip(xs, lows, highs)
                         if all(math.isfinite(float(v)) for v in (x, lo, hi))]
    finite = [p for pts in points.values() for p in pts] + [
        (x, y) for pts in shaded.values() for x, lo, hi in pts for y in (lo, hi)]
    if not finite:
        raise ValueError(f"No finite point to plot in series {list(series)}")
    x_low, x_high = min(p[0] for p in finite), max(p[0] for p in finite)
    y_low, y_high = min(p[1] for p in finite), max(p[1] for p in finite)
    if x_high == x_low:
        x_high = x_low + 1.0
    if y_high == y_low:
        y_high = y_low + 1.0
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def sx(x):
        return _LEFT + (x - x_low) / (x_high - x_low) * plot_w

    def sy(y):
        return _TOP + (y_high - y) / (y_high - y_low) * plot_h

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{_WIDTH}" height="{_HEIGHT}" fill="white"/>',
             f'<text x="{_WIDTH / 2}" y="20" text-anchor="middle" font-size="14">'
             f'{escape(title)}</text>',
             f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
             f'stroke="black"/>']
    for x in _ticks(x_low, x_high):
        parts.append(f'<text x="{sx(x):.1f}" y="{_TOP + plot_h + 16}" text-anchor="middle">'
                     f'{x:g}</text>')
    for y in _ticks(y_low, y_high):
        parts.append(f'<line x1="{_LEFT}" x2="{_LEFT + plot_w}" y1="{sy(y):.1f}" '
                     f'y2="{sy(y):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{_LEFT - 6}" y="{sy(y) + 4:.1f}" text-anchor="end">{y:.3g}</text>')
    parts.append(f'<text x="{_LEFT + plot_w / 2}" y="{_HEIGHT - 12}" text-anchor="middle">'
                 f'{escape(xlabel)}</text>')
    parts.append(f'<text x="16" y="{_TOP + plot_h / 2}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {_TOP + plot_h / 2})">{escape(ylabel)}</text>')
    for index, (label, pts) in enumerate(points.items()):
        color = COLORS[index % len(COLORS)]
        band = shaded.get(label)
        if band:
            outline = ([f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in band]
                       + [f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(band)])
            parts.append(f'<polygon fill="{color}" fill-opacity="0.15" stroke="none" '
                         f'points="{" ".join(outline)}"/>')
        coordinates = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.2" '
                     f'points="{coordinates}"><title>{escape(label)}</title></polyline>')
        legend_y = _TOP + 16 + 16 * index
        parts.append(f'<line x1="{_LEFT + plot_w - 190}" x2="{_LEFT + plot_w - 170}" '
                     f'y1="{legend_y - 4}" y2="{legend_y - 4}" stroke="{color}" stroke-width="2"/>')
        parts.append(f'<text x="{_LEFT + plot_w - 165}" y="{legend_y}">{escape(label)}</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    return path


def pca_2d(vectors):
    """Rows of `vectors` `(n, d)` projected on their first two principal axes `(n, 2)`."""
    import numpy as np

    centered = np.asarray(vectors, dtype=np.float64)
    centered = centered - centered.mean(axis=0)
    _, _, axes = np.linalg.svd(centered, full_matrices=False)
    projected = centered @ axes[:2].T
    if projected.shape[1] < 2:
        projected = np.pad(projected, ((0, 0), (0, 2 - projected.shape[1])))
    return projected


def write_paired_embedding_plot(path, source_vectors, target_vectors, source_labels,
                                target_labels, title=""):
    """Liu et al. (2019) Figure 6: a 2-D PCA of source and target embeddings.

    Both sides are projected together (one PCA over the stacked rows); source
    words are drawn in blue, target words in red, and the i-th source word is
    joined to the i-th target word (its pair) by a grey line.

    Args:
        path: str, the `.svg` file to write.
        source_vectors, target_vectors: arrays `(n, d)`, row i of each a pair.
        source_labels, target_labels: sequences of n str.
        title: str.

    Raises:
        ValueError: sides of different sizes or fewer than two pairs.
    """
    import numpy as np

    source_vectors, target_vectors = np.asarray(source_vectors), np.asarray(target_vectors)
    n = len(source_vectors)
    if not (len(target_vectors) == len(source_labels) == len(target_labels) == n) or n < 2:
        raise ValueError(
            "Give at least two pairs, as many vectors as labels on both sides. Received: "
            f"{len(source_vectors)}/{len(target_vectors)} vectors, "
            f"{len(source_labels)}/{len(target_labels)} labels")
    points = pca_2d(np.concatenate([source_vectors, target_vectors]))
    low, high = points.min(axis=0), points.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    xy = [(_LEFT + (x - low[0]) / span[0] * plot_w, _TOP + (high[1] - y) / span[1] * plot_h)
          for x, y in points]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{_HEIGHT}" '
             f'font-family="sans-serif" font-size="11">',
             f'<rect width="{_WIDTH}" height="{_HEIGHT}" fill="white"/>',
             f'<text x="{_WIDTH / 2}" y="20" text-anchor="middle" font-size="14">'
             f'{escape(title)}</text>']
    for i in range(n):
        (x1, y1), (x2, y2) = xy[i], xy[n + i]
        parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                     'stroke="#ccc"/>')
    for index, ((x, y), label) in enumerate(zip(xy, list(source_labels) + list(target_labels))):
        color = COLORS[1] if index < n else COLORS[0]
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>')
        parts.append(f'<text x="{x + 4:.1f}" y="{y - 3:.1f}" fill="{color}">{escape(label)}</text>')
    parts.append(f'<text x="{_LEFT}" y="{_HEIGHT - 12}" fill="{COLORS[1]}">source</text>')
    parts.append(f'<text x="{_LEFT + 60}" y="{_HEIGHT - 12}" fill="{COLORS[0]}">target</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    return path


__all__ = ["pca_2d", "write_line_plot", "write_paired_embedding_plot"]

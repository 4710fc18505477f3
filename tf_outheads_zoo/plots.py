"""Line plots as self-contained SVG files (no plotting library needed).

Training runs write their loss curves next to their logs; an SVG opens in any
browser and needs nothing installed.

Text is laid out with an estimate of its width (`text_width`), so titles, axis
labels and the legend stay inside the image whatever font the viewer picks from
`FONT_FAMILY`: long titles wrap onto up to three lines, shrink to a floor of
10 px, and are cut with an ellipsis only past that.
"""

import math
import unicodedata
from xml.sax.saxutils import escape

# Series colours: the ten of Tableau/D3 "category10", told apart by hue (series
# past the tenth reuse them with a dash pattern, see `series_style`).
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
          "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
# Dash patterns (SVG stroke-dasharray) of the 2nd, 3rd, ... round of the palette.
DASHES = ("", "7 3", "2 2", "9 3 2 3", "4 4", "12 3 2 3 2 3")
_BLUE, _RED = "#1f77b4", "#d62728"
FONT_FAMILY = "Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"
_WIDTH, _HEIGHT = 720, 420
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 40, 50
_PLOT_HEIGHT = 330
_MARGIN = 10  # no text closer than this to the image's edges
_FONT_SIZE = 12
_TITLE_FITS = ((14, 2), (13, 2), (12, 2), (12, 3), (11, 3), (10, 3))  # (font size, lines)
_SUBTITLE_FITS = ((11, 2), (10, 2), (10, 3))
_ELLIPSIS = "\u2026"

# Advance widths in 1/1000 em of the fonts `FONT_FAMILY` names, character by
# character: Helvetica from Adobe's Helvetica AFM (Arial and Liberation Sans
# share its metrics), DejaVu Sans (the usual Linux fallback, wider) from its
# TrueType file. `text_width` takes the wider of the two.
_CHARS = (" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`"
          "abcdefghijklmnopqrstuvwxyz{|}~\u2013\u2014\u00d7\u00b1\u00b0\u00b7\u2026\u2022"
          "\u2212\u2018\u2019\u201c\u201d\u00b5\u20ac")
_HELVETICA = (
    278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278,
    556, 556, 556, 556, 556, 556, 556, 556, 556, 556, 278, 278, 584, 584, 584, 556,
    1015, 667, 667, 722, 722, 667, 611, 778, 722, 278, 500, 667, 556, 833, 722, 778,
    667, 778, 722, 667, 611, 722, 667, 944, 667, 667, 611, 278, 278, 278, 469, 556,
    333, 556, 556, 500, 556, 556, 278, 556, 556, 222, 222, 500, 222, 833, 556, 556,
    556, 556, 333, 500, 278, 556, 500, 722, 500, 500, 500, 334, 260, 334, 584,
    556, 1000, 584, 584, 400, 278, 1000, 350, 584, 222, 222, 333, 333, 578, 556)
_DEJAVU_SANS = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337,
    636, 636, 636, 636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 531,
    1000, 684, 686, 698, 770, 632, 575, 775, 752, 295, 295, 656, 557, 863, 748, 787,
    603, 787, 695, 635, 611, 732, 684, 989, 685, 611, 685, 390, 337, 390, 838, 500,
    500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579, 278, 974, 634, 612,
    635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
    500, 1000, 838, 838, 500, 318, 1000, 590, 838, 318, 318, 518, 518, 636, 636)
_ADVANCE = {c: max(h, d) / 1000 for c, h, d in zip(_CHARS, _HELVETICA, _DEJAVU_SANS)}
_UNKNOWN_ADVANCE = 1.0  # a full em: wider than any Latin, Greek or Cyrillic letter


def _advance(char):
    """Advance width of one character in em (see `_ADVANCE`)."""
    width = _ADVANCE.get(char)
    if width is not None:
        return width
    category = unicodedata.category(char)
    if category in ("Mn", "Me", "Cf"):  # combining marks, zero-width characters
        return 0.0
    if category == "Zs":
        return _ADVANCE[" "]
    base = unicodedata.normalize("NFD", char)[0]  # é → e
    return _ADVANCE.get(base, _UNKNOWN_ADVANCE) if base != char else _UNKNOWN_ADVANCE


def text_width(text, font_size=_FONT_SIZE):
    """Estimated width in px of `text` drawn at `font_size` px in `FONT_FAMILY`.

    The sum of per-character advance widths, each the wider of Helvetica's (Adobe
    AFM; also Arial's) and DejaVu Sans's, so the estimate holds (errs wide) for
    whichever the viewer has; characters outside the table count a full em
    (accented letters as their base letter, combining marks as nothing).
    """
    return font_size * sum(_advance(c) for c in text)


def _truncate(text, max_width, font_size):
    """`text`, cut and ended with an ellipsis if wider than `max_width`."""
    if text_width(text, font_size) <= max_width:
        return text
    while text and text_width(text.rstrip() + _ELLIPSIS, font_size) > max_width:
        text = text[:-1]
    return text.rstrip() + _ELLIPSIS if text else ""


def _wrap(text, max_width, font_size):
    """Lines of `text` broken at spaces, each within `max_width` (an overlong word
    is broken where it must)."""
    lines, current = [], ""
    for word in text.split():
        candidate = f"{current} {word}" if current else word
        if text_width(candidate, font_size) <= max_width:
            current = candidate
            continue
        if current:
            lines.append(current)
        while text_width(word, font_size) > max_width and len(word) > 1:
            cut = 1
            while cut < len(word) and text_width(word[:cut + 1], font_size) <= max_width:
                cut += 1
            lines.append(word[:cut])
            word = word[cut:]
        current = word
    if current:
        lines.append(current)
    return lines


def _fit(text, max_width, attempts):
    """`(font_size, lines)`: `text` wrapped within `max_width` by the first of
    `attempts`, `(font size, most lines)` pairs, that holds it; past the last, its
    lines with the last one cut by an ellipsis."""
    for size, most in attempts:
        lines = _wrap(text, max_width, size)
        if len(lines) <= most:
            # Balance the lines: the narrowest width that needs no more of them.
            narrow, wide = max_width / max(len(lines), 1) / 2, max_width
            while wide - narrow > 1:
                middle = (narrow + wide) / 2
                narrow, wide = ((narrow, middle) if len(_wrap(text, middle, size)) <= len(lines)
                                else (middle, wide))
            return size, _wrap(text, wide, size)
    size, most = attempts[-1]
    lines = _wrap(text, max_width, size)
    return size, lines[:most - 1] + [_truncate(" ".join(lines[most - 1:]), max_width, size)]


def _text_block(lines, font_size, top, x, **attributes):
    """SVG `<text>` elements of `lines` from `top` down; returns `(parts, bottom)`."""
    extra = "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attributes.items())
    parts, step = [], round(font_size * 1.25, 1)
    for line in lines:
        top += step
        parts.append(f'<text x="{x:g}" y="{top - 0.25 * font_size:.1f}" '
                     f'text-anchor="middle" font-size="{font_size}"{extra}>'
                     f'{escape(line)}</text>')
    return parts, top


def _heading(title, subtitle, width):
    """The title and subtitle lines centred at the top; returns `(parts, bottom)`."""
    parts, bottom = [], _MARGIN
    room = width - 2 * _MARGIN
    if title:
        size, lines = _fit(title, room, _TITLE_FITS)
        parts, bottom = _text_block(lines, size, bottom, width / 2)
    if subtitle:
        size, lines = _fit(subtitle, room, _SUBTITLE_FITS)
        more, bottom = _text_block(lines, size, bottom + 2, width / 2, fill="#555")
        parts += more
    return parts, bottom


def series_style(index):
    """`(colour, dash)` of the `index`-th series: the palette's colours in turn,
    solid the first time round, then with a dash pattern per round, so that no two
    series share both (`dash` is `""` for a solid line, else a stroke-dasharray)."""
    round_, slot = divmod(index, len(COLORS))
    dash = DASHES[round_] if round_ < len(DASHES) else f"{round_ - len(DASHES) + 3} 2 1 2"
    return COLORS[slot], dash


def _number(value, step=None):
    """`value` written for an axis whose ticks are `step` apart (enough decimals to
    tell them apart; `None`: a value of its own, such as the axis's first x)."""
    if step is None:
        return str(int(value)) if value == int(value) and abs(value) < 1e15 else f"{value:.6g}"
    value = round(value / step) * step + 0.0  # + 0.0: no "-0"
    if 1e-4 <= max(abs(value), step) < 1e7:
        return f"{value:.{max(0, -math.floor(math.log10(step) + 1e-9))}f}"
    return f"{value:.3g}"


def _ticks(low, high, count=5):
    """`(value, label)` of about `count` round ticks within [low, high]."""
    if not high > low:
        return [(low, _number(low))]
    raw = (high - low) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = min((m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw), default=raw)
    first = math.ceil(low / step - 1e-9) * step
    return [(first + i * step, _number(first + i * step, step))
            for i in range(int((high - first) / step + 1e-9) + 1)]


def write_line_plot(path, series, title="", xlabel="", ylabel="", bands=None, *,
                    subtitle="", width=_WIDTH):
    """Writes an SVG line plot of several named series.

    The x axis runs from the first point to the last (from 0 when the first is at
    0 < x <= 1 of a long axis, e.g. step 1), with round ticks inside it and the
    first point's x written at the left end. The legend sits under the plot,
    in as many columns as fit. Every series gets its own colour (`series_style`:
    ten colours, then dash patterns). No text leaves the image: the title wraps
    onto up to three lines and shrinks, then is cut with an ellipsis (the full
    title stays in the SVG's `<title>`); long labels are cut likewise.

    Args:
        path: str, the `.svg` file to write.
        series: dict of label → `(xs, ys)`, sequences of numbers of equal length.
            Non-finite points are skipped.
        title, xlabel, ylabel: str.
        bands: optional dict of label → `(xs, lows, highs)`: a shaded band in the
            series' colour (e.g. the range over seeds around their mean).
        subtitle: str, a smaller grey line (or lines) under the title, for detail
            such as what the bands are.
        width: int, the image's width in px (at least 320); its height follows
            from the title, the legend and a plot area of 330 px.

    Returns:
        `path`.

    Raises:
        ValueError: if `series` is empty, a series' xs and ys differ in length,
            no series has a finite point, a band has no series, or `width` is
            under 320.
    """
    if not series:
        raise ValueError("`series` must hold at least one (xs, ys) pair. Received: {}")
    if width < 320:
        raise ValueError(f"`width` must be at least 320 px. Received: {width}")
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
    if 0 < x_low <= 1 and x_low < 0.01 * (x_high - x_low):
        x_low = 0.0  # step 1 of a long run: the axis starts at its round 0
    if x_high == x_low:
        x_high = x_low + 1.0
    if y_high == y_low:
        y_high = y_low + 1.0
    pad = 0.03 * (y_high - y_low)  # lines off the frame's edges
    y_low, y_high = y_low - pad, y_high + pad
    size = _FONT_SIZE
    y_ticks = _ticks(y_low, y_high, 6)

    heading, heading_bottom = _heading(title, subtitle, width)
    top = max(heading_bottom + 12, 24)
    plot_h = _PLOT_HEIGHT
    ylabel_band = _MARGIN + size + 6 if ylabel else _MARGIN
    left = max(ylabel_band + max(text_width(t, size) for _, t in y_ticks) + 8, 50)
    for count in (5, 4, 3, 2, 1):  # fewer x ticks until their labels don't touch
        x_ticks = _ticks(x_low, x_high, count)
        widest = max(text_width(t, size) for _, t in x_ticks)
        # Room either side of the frame for half the widest label (centred on its tick).
        left, right = max(left, _MARGIN + widest / 2), max(20, _MARGIN + widest / 2)
        plot_w = width - left - right
        spacing = (x_ticks[1][0] - x_ticks[0][0] if len(x_ticks) > 1 else math.inf)
        if spacing / (x_high - x_low) * plot_w >= widest + 12:
            break

    def sx(x):
        return left + (x - x_low) / (x_high - x_low) * plot_w

    def sy(y):
        return top + (y_high - y) / (y_high - y_low) * plot_h

    bottom = top + plot_h
    parts = [f'<rect width="{width}" height="HEIGHT" fill="white"/>',
             *heading,
             f'<rect x="{left:g}" y="{top:g}" width="{plot_w:g}" height="{plot_h}" '
             'fill="none" stroke="black"/>']
    for y, label in y_ticks:
        parts.append(f'<line x1="{left:g}" x2="{left + plot_w:g}" y1="{sy(y):.1f}" '
                     f'y2="{sy(y):.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6:g}" y="{sy(y) + 4:.1f}" text-anchor="end">'
                     f'{label}</text>')
    x_labels = list(x_ticks)
    start = _number(x_low)
    if not math.isclose(x_ticks[0][0], x_low, abs_tol=1e-9 * (x_high - x_low)):
        # The axis starts at the first point, between round ticks: say where.
        half = text_width(start, size) / 2
        gap = sx(x_ticks[0][0]) - text_width(x_ticks[0][1], size) / 2 - (left + half)
        if gap >= 8 and left - half >= _MARGIN:
            x_labels.insert(0, (x_low, start))
    for x, label in x_labels:
        parts.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{bottom}" '
                     f'y2="{bottom + 4}" stroke="black"/>')
        parts.append(f'<text x="{sx(x):.1f}" y="{bottom + 17}" text-anchor="middle">'
                     f'{label}</text>')
    legend_top = bottom + 24
    if xlabel:
        text = _truncate(xlabel, width - 2 * _MARGIN, size)
        half = text_width(text, size) / 2
        center = min(max(left + plot_w / 2, _MARGIN + half), width - _MARGIN - half)
        parts.append(f'<text x="{center:.1f}" y="{bottom + 38}" text-anchor="middle">'
                     f'{escape(text)}</text>')
        legend_top = bottom + 46
    if ylabel:
        text = _truncate(ylabel, plot_h, size)
        x, y = _MARGIN + size, top + plot_h / 2
        parts.append(f'<text x="{x}" y="{y:g}" text-anchor="middle" '
                     f'transform="rotate(-90 {x} {y:g})">{escape(text)}</text>')
    styles = {label: series_style(i) for i, label in enumerate(points)}
    for label, band in shaded.items():
        if band:
            outline = ([f"{sx(x):.1f},{sy(hi):.1f}" for x, _, hi in band]
                       + [f"{sx(x):.1f},{sy(lo):.1f}" for x, lo, _ in reversed(band)])
            parts.append(f'<polygon fill="{styles[label][0]}" fill-opacity="0.15" '
                         f'stroke="none" points="{" ".join(outline)}"/>')
    for label, pts in points.items():
        color, dash = styles[label]
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        coordinates = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.6"{dashing} '
                     f'stroke-linejoin="round" points="{coordinates}">'
                     f'<title>{escape(label)}</title></polyline>')
        if len(pts) == 1:
            parts.append(f'<circle cx="{sx(pts[0][0]):.1f}" cy="{sy(pts[0][1]):.1f}" r="2.5" '
                         f'fill="{color}"/>')
    # Legend: a grid under the axis label, as many columns as the widest label allows.
    swatch, gap, room = 24, 5, width - 2 * _MARGIN
    labels = {label: _truncate(label, room - swatch - gap, size) for label in points}
    column = swatch + gap + max(text_width(t, size) for t in labels.values()) + 18
    columns = max(1, min(len(labels), int((room + 18) // column)))
    block = columns * column - 18
    legend_left = max(_MARGIN, (width - block) / 2)
    for index, (label, text) in enumerate(labels.items()):
        row, col = divmod(index, columns)
        x, y = legend_left + col * column, legend_top + 18 * row
        color, dash = styles[label]
        if shaded.get(label):
            parts.append(f'<rect x="{x:.1f}" y="{y + 1}" width="{swatch}" height="10" '
                         f'fill="{color}" fill-opacity="0.15"/>')
        dashing = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<line x1="{x:.1f}" x2="{x + swatch:.1f}" y1="{y + 6}" y2="{y + 6}" '
                     f'stroke="{color}" stroke-width="2"{dashing}/>')
        entry = f'<text x="{x + swatch + gap:.1f}" y="{y + 10}">{escape(text)}</text>'
        if text != label:  # cut: the full label shows on hover
            entry = f"<g><title>{escape(label)}</title>{entry}</g>"
        parts.append(entry)
    height = math.ceil(legend_top + 18 * math.ceil(len(labels) / columns) + _MARGIN)
    parts[0] = parts[0].replace("HEIGHT", str(height))
    header = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
              f'font-family="{FONT_FAMILY}" font-size="{size}">')
    described = [f"<title>{escape(title)}</title>"] if title else []
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join([header, *described, *parts, "</svg>"]) + "\n")
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
    heading, heading_bottom = _heading(title, "", _WIDTH)
    top = max(_TOP, heading_bottom + 18)  # room for the top word above its point
    height = top + _HEIGHT - _TOP
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    xy = [(_LEFT + (x - low[0]) / span[0] * plot_w, top + (high[1] - y) / span[1] * plot_h)
          for x, y in points]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_WIDTH}" height="{height}" '
             f'font-family="{FONT_FAMILY}" font-size="11">',
             f'<rect width="{_WIDTH}" height="{height}" fill="white"/>', *heading]
    for i in range(n):
        (x1, y1), (x2, y2) = xy[i], xy[n + i]
        parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
                     'stroke="#ccc"/>')
    for index, ((x, y), label) in enumerate(zip(xy, list(source_labels) + list(target_labels))):
        color = _BLUE if index < n else _RED
        # Words on the right half are written leftwards, so that they stay inside.
        text = _truncate(str(label), plot_w / 2, 11)
        anchor, at = ("end", x - 4) if x > _LEFT + plot_w / 2 else ("start", x + 4)
        parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}"/>')
        parts.append(f'<text x="{at:.1f}" y="{y - 3:.1f}" text-anchor="{anchor}" '
                     f'fill="{color}">{escape(text)}</text>')
    parts.append(f'<text x="{_LEFT}" y="{height - 12}" fill="{_BLUE}">source</text>')
    parts.append(f'<text x="{_LEFT + 60}" y="{height - 12}" fill="{_RED}">target</text>')
    parts.append("</svg>")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(parts) + "\n")
    return path


__all__ = ["COLORS", "DASHES", "FONT_FAMILY", "pca_2d", "series_style", "text_width",
           "write_line_plot", "write_paired_embedding_plot"]

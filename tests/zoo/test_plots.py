"""tf_outheads_zoo.plots: SVG line plots."""

import math
import os
import re
from xml.etree import ElementTree

import pytest

from tf_outheads_zoo.plots import (COLORS, FONT_FAMILY, series_style, text_width,
                                   write_line_plot, write_paired_embedding_plot)

SVG = "{http://www.w3.org/2000/svg}"
ARMS = ("untied", "tied", "joint-512", "joint-1024", "bilinear", "output-structure",
        "context-structure", "joint-1024 (beam 5, length penalty 0.6)")
STUDIES = ("Joint input-output embeddings (Pappas et al. 2018)",
           "Continuous outputs with the vMF loss (Kumar & Tsvetkov 2019)",
           "ReWE: regressing word embeddings (Jauregi Unanue et al. 2019)",
           "Shared-private bilingual embeddings (Liu et al. 2019)")
# The titles `study.report` gives its figures, and longer ones.
TITLES = [f"{study}: {what}" for study in STUDIES for what in (
    "dev BLEU (mean over seeds, band: their range)",
    "dev loss (the training loss on dev) (mean over seeds, band: their range)",
    "training loss (moving average of 50 steps, mean over seeds)")] + [
    ("Joint input-output embeddings (Pappas et al. 2018) against untied, tied and "
     "bilinear heads: dev loss (the training loss on dev), mean over three seeds with "
     "the band their range — λ = 0.2, µ ≈ 0.1, naïve")[:200],
    "W" * 200,  # one unbreakable word, of the widest letter
    "Ω∑ " * 600]


def _points(polyline):
    return [tuple(map(float, p.split(","))) for p in polyline.get("points").split()]


def _text_boxes(path):
    """`(width, height, boxes)`: each `<text>`'s content and estimated box
    `(left, right, top, bottom)` in image coordinates, from its x, y, text-anchor,
    font size (its own or inherited) and rotation."""
    root = ElementTree.parse(path).getroot()
    width, height = float(root.get("width")), float(root.get("height"))
    parents = {child: parent for parent in root.iter() for child in parent}
    boxes = []
    for element in root.iter(f"{SVG}text"):
        text = "".join(element.itertext())
        size, node = None, element
        while size is None and node is not None:
            size, node = node.get("font-size"), parents.get(node)
        size = float(size or 16)  # the SVG default
        x, y = float(element.get("x", 0)), float(element.get("y", 0))
        extent = text_width(text, size)
        left = x - {"start": 0, "middle": extent / 2, "end": extent}[
            element.get("text-anchor", "start")]
        corners = [(left, y - 0.95 * size), (left + extent, y - 0.95 * size),
                   (left, y + 0.25 * size), (left + extent, y + 0.25 * size)]
        rotation = re.fullmatch(r"rotate\(([-\d.]+) ([-\d.]+) ([-\d.]+)\)",
                                element.get("transform", "rotate(0 0 0)"))
        assert rotation, element.get("transform")
        angle, cx, cy = (float(v) for v in rotation.groups())
        cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
        corners = [(cx + (px - cx) * cos - (py - cy) * sin, cy + (px - cx) * sin + (py - cy) * cos)
                   for px, py in corners]
        xs, ys = [c[0] for c in corners], [c[1] for c in corners]
        boxes.append((text, min(xs), max(xs), min(ys), max(ys)))
    return width, height, boxes


def assert_text_inside(path, apart=True):
    """Every text within the image's width and height, and (`apart`) no two texts
    overlapping."""
    width, height, boxes = _text_boxes(path)
    assert boxes
    for text, left, right, top, bottom in boxes:
        assert 0 <= left and right <= width, f"{text!r}: x {left:.1f}..{right:.1f} of {width}"
        assert 0 <= top and bottom <= height, f"{text!r}: y {top:.1f}..{bottom:.1f} of {height}"
    for i, (text, left, right, top, bottom) in enumerate(boxes if apart else ()):
        for other, left_, right_, top_, bottom_ in boxes[i + 1:]:
            assert (right <= left_ or right_ <= left or bottom <= top_ or bottom_ <= top), (
                f"{text!r} overlaps {other!r}")


def _study_plot(path, title, arms=ARMS[:7], steps=(300, 600, 900, 1200, 1500), **kwargs):
    series = {arm: (steps, [5 - 0.1 * i - math.log(s / steps[0] + 1) for s in steps])
              for i, arm in enumerate(arms)}
    bands = {arm: (xs, [y - 0.05 for y in ys], [y + 0.05 for y in ys])
             for arm, (xs, ys) in series.items()}
    return write_line_plot(str(path), series, title=title, xlabel="training step",
                           ylabel="loss (nats per token)", bands=bands, **kwargs)


def test_each_series_is_a_polyline_scaled_into_the_frame(tmp_path):
    path = write_line_plot(str(tmp_path / "p.svg"), {
        "NLL": ([1, 2, 3, 4], [5.0, 4.0, 3.5, float("nan")]),  # NaN points are skipped
        "ReWE <cos>": ([1, 2, 3, 4], [0.9, 0.7, 0.6, 0.5]),
    }, title="losses", xlabel="step", ylabel="loss")
    root = ElementTree.parse(path).getroot()
    lines = root.findall(f"{SVG}polyline")
    assert [line.find(f"{SVG}title").text for line in lines] == ["NLL", "ReWE <cos>"]
    frame = root.findall(f"{SVG}rect")[1]
    x0, y0 = float(frame.get("x")), float(frame.get("y"))
    x1, y1 = x0 + float(frame.get("width")), y0 + float(frame.get("height"))
    nll = _points(lines[0])
    assert len(nll) == 3
    for x, y in nll + _points(lines[1]):
        assert x0 - 1e-6 <= x <= x1 + 1e-6 and y0 - 1e-6 <= y <= y1 + 1e-6
    # The largest value is at the top of the frame (3 % of the range below its edge),
    # the first step at its left.
    assert nll[0] == (pytest.approx(x0, abs=0.05), pytest.approx(y0 + 0.03 / 1.06 * (y1 - y0),
                                                                  abs=0.05))
    # Higher values are drawn higher (smaller y).
    assert nll[0][1] < nll[1][1] < nll[2][1]


@pytest.mark.parametrize("series, message", [
    ({}, "at least one"),
    ({"a": ([1, 2], [1.0])}, "2 x values but 1 y values"),
    ({"a": ([1], [float("inf")])}, "No finite point"),
])
def test_bad_series_are_refused(tmp_path, series, message):
    with pytest.raises(ValueError, match=message):
        write_line_plot(str(tmp_path / "p.svg"), series)


def test_a_band_needs_its_series_and_the_width_room(tmp_path):
    with pytest.raises(ValueError, match="Band 'b' has no series"):
        write_line_plot(str(tmp_path / "p.svg"), {"a": ([1], [1])}, bands={"b": ([1], [0], [2])})
    with pytest.raises(ValueError, match="at least 320"):
        write_line_plot(str(tmp_path / "p.svg"), {"a": ([1], [1])}, width=200)


@pytest.mark.parametrize("title", TITLES, ids=range(len(TITLES)))
@pytest.mark.parametrize("width", [720, 400])
def test_every_text_stays_inside_the_image(tmp_path, title, width):
    path = _study_plot(tmp_path / "p.svg", title, arms=ARMS, width=width,
                       subtitle="mean over seeds; band: their range (min to max) " * 4)
    assert_text_inside(path)


@pytest.mark.parametrize("xs, ys", [
    ((1_000_000, 1_250_000, 1_500_000), (1e-5, 3e-5, 2.5e-5)),
    ((0.001, 0.002, 0.0035), (-123456.0, 1.5, 2e6)),
    ((123_456_789, 123_456_790, 987_654_321), (1.0001, 1.0002, 1.0003)),
    ((3, 3, 3), (7, 7, 7)),
])
@pytest.mark.parametrize("width", [720, 320])
def test_tick_labels_fit_and_keep_apart(tmp_path, xs, ys, width):
    path = write_line_plot(str(tmp_path / "p.svg"), {"a": (xs, ys)}, title="ticks",
                           xlabel="x", ylabel="y", width=width)
    assert_text_inside(path)
    texts = [t.text for t in ElementTree.parse(path).getroot().findall(f"{SVG}text")]
    assert len(texts) == len(set(texts))  # no two ticks with the same label


def test_long_labels_and_large_numbers_stay_inside(tmp_path):
    label = "an arm with a very long name, " * 5
    path = write_line_plot(str(tmp_path / "p.svg"), {
        label + "1": ([1_000_000, 1_250_000, 1_500_000], [1e-5, 3e-5, 2.5e-5]),
        label + "2": ([1_000_000, 1_500_000], [-123456.0, 2e-5]),
        "short": ([1_000_000, 1_500_000], [0, 1])},
        title="T" * 300, xlabel="training step " * 40, ylabel="loss " * 80)
    assert_text_inside(path)
    assert any(text.endswith("\u2026") for text, *_ in _text_boxes(path)[2])


def test_a_long_title_wraps_shrinks_and_is_cut_last(tmp_path):
    def title_lines(path):
        root = ElementTree.parse(path).getroot()
        # The title's lines: the texts of their own font size that are not grey.
        return root, [(t.text, float(t.get("font-size"))) for t in root.findall(f"{SVG}text")
                      if t.get("font-size") and not t.get("fill")]

    root, lines = title_lines(_study_plot(tmp_path / "a.svg", TITLES[1]))
    # Pappas's dev loss title: two balanced lines at the full 14 px, nothing dropped.
    assert [size for _, size in lines] == [14, 14]
    assert " ".join(text for text, _ in lines) == TITLES[1]
    assert abs(text_width(lines[0][0], 14) - text_width(lines[1][0], 14)) < 200
    root, lines = title_lines(_study_plot(tmp_path / "b.svg", TITLES[-3]))
    assert 2 <= len(lines) <= 3 and " ".join(text for text, _ in lines) == TITLES[-3]
    root, lines = title_lines(_study_plot(tmp_path / "c.svg", "word " * 400))
    assert [size for _, size in lines] == [10] * 3 and lines[-1][0].endswith("\u2026")
    assert root.find(f"{SVG}title").text == "word " * 400  # the whole title, for hover


def test_the_subtitle_is_a_smaller_grey_line_under_the_title(tmp_path):
    path = _study_plot(tmp_path / "p.svg", "Pappas et al. 2018: dev loss",
                       subtitle="mean over seeds, band: their range")
    texts = ElementTree.parse(path).getroot().findall(f"{SVG}text")
    assert [t.text for t in texts[:2]] == ["Pappas et al. 2018: dev loss",
                                           "mean over seeds, band: their range"]
    assert float(texts[1].get("font-size")) < float(texts[0].get("font-size"))
    assert float(texts[1].get("y")) > float(texts[0].get("y"))
    assert texts[1].get("fill") == "#555"


def test_each_series_has_its_own_colour_then_dash(tmp_path):
    assert len(set(COLORS)) == len(COLORS) >= 10
    for count in (7, len(COLORS), 3 * len(COLORS) + 3):
        series = {f"arm {i}": ([1, 2], [i, i + 1]) for i in range(count)}
        root = ElementTree.parse(write_line_plot(str(tmp_path / "p.svg"), series)).getroot()
        styles = [(p.get("stroke"), p.get("stroke-dasharray"))
                  for p in root.findall(f"{SVG}polyline")]
        assert len(styles) == count and len(set(styles)) == count
        if count <= len(COLORS):  # colour alone tells them apart: all solid
            assert len({color for color, _ in styles}) == count
            assert {dash for _, dash in styles} == {None}
        # The legend shows each series' colour and dash.
        swatches = [(s.get("stroke"), s.get("stroke-dasharray"))
                    for s in root.findall(f"{SVG}line") if s.get("stroke-width") == "2"]
        assert swatches == styles
    assert len({series_style(i) for i in range(500)}) == 500


def test_the_legend_is_under_the_plot(tmp_path):
    root = ElementTree.parse(_study_plot(tmp_path / "p.svg", TITLES[1], arms=ARMS)).getroot()
    frame = root.findall(f"{SVG}rect")[1]
    bottom = float(frame.get("y")) + float(frame.get("height"))
    labels = [t for t in root.findall(f"{SVG}text") if t.text in ARMS]
    assert [t.text for t in labels] == list(ARMS)
    assert all(float(t.get("y")) - 12 > bottom + 30 for t in labels)  # below the tick labels


def _x_axis(path):
    root = ElementTree.parse(path).getroot()
    frame = root.findall(f"{SVG}rect")[1]
    bottom = float(frame.get("y")) + float(frame.get("height"))
    ticks = [(float(t.get("x")), t.text) for t in root.findall(f"{SVG}text")
             if float(t.get("y")) == pytest.approx(bottom + 17)]
    return float(frame.get("x")), _points(root.find(f"{SVG}polyline"))[0][0], ticks


@pytest.mark.parametrize("steps, first_label, round_labels", [
    ((300, 600, 900, 1200, 1500), "300", ["500", "1000", "1500"]),
    ((1000, 2000, 3000), "1000", ["1000", "1500", "2000", "2500", "3000"]),
    ((0, 500, 1000), "0", ["0", "200", "400", "600", "800", "1000"]),
    ((1, 500, 1000), "0", ["0", "200", "400", "600", "800", "1000"]),  # step 1: from 0
])
def test_the_x_axis_starts_at_the_first_point(tmp_path, steps, first_label, round_labels):
    left, first_x, ticks = _x_axis(write_line_plot(
        str(tmp_path / "p.svg"), {"a": (steps, list(range(len(steps), 0, -1)))}))
    # The axis's left end is labelled, then round ticks follow.
    assert ticks[0] == (pytest.approx(left, abs=0.05), first_label)
    assert [label for _, label in ticks] == (
        [] if first_label in round_labels else [first_label]) + round_labels
    if steps[0] > 1:  # the first point is at the left edge, no room for x < first
        assert first_x == pytest.approx(left, abs=0.05)
        assert all(float(label) >= steps[0] for _, label in ticks)


def test_the_width_estimate_is_the_wider_of_helvetica_and_dejavu_sans():
    assert "Helvetica" in FONT_FAMILY and "DejaVu Sans" in FONT_FAMILY
    assert text_width("i", 1000) == pytest.approx(278)  # Helvetica 222, DejaVu Sans 278
    assert text_width("W", 1000) == pytest.approx(989)  # Helvetica 944, DejaVu Sans 989
    assert text_width("@", 1000) == pytest.approx(1015)  # Helvetica 1015, DejaVu Sans 1000
    assert text_width("é", 10) == text_width("e", 10)
    assert text_width("中λ", 10) == pytest.approx(20)  # outside the table: a full em each
    assert text_width("ab", 12) == pytest.approx(text_width("a", 12) + text_width("b", 12))


def test_the_width_estimate_is_not_narrower_than_dejavu_sans_renders():
    font = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    if not os.path.exists(font):
        pytest.skip("DejaVu Sans is not installed")
    ImageFont = pytest.importorskip("PIL.ImageFont")
    measure = ImageFont.truetype(font, 1000)
    for text in TITLES[:-1] + list(ARMS):
        assert text_width(text, 1000) >= measure.getlength(text) - 1, text


def test_the_paired_embedding_plot_keeps_its_words_inside(tmp_path):
    np = pytest.importorskip("numpy")
    vectors = np.random.default_rng(0).normal(size=(12, 4))
    path = write_paired_embedding_plot(
        str(tmp_path / "p.svg"), vectors[:6], vectors[6:], ["Wortzusammensetzung"] * 6,
        ["compoundwordinglish"] * 6, title=TITLES[-3])
    assert_text_inside(path, apart=False)  # words of near points may overlap: a PCA
    _, _, boxes = _text_boxes(path)
    title_bottom = max(bottom for text, _, _, _, bottom in boxes if text in TITLES[-3])
    assert all(top >= title_bottom for text, _, _, top, _ in boxes if text not in TITLES[-3])

"""tf_outheads_zoo.plots: SVG line plots."""

from xml.etree import ElementTree

import pytest

from tf_outheads_zoo.plots import write_line_plot

SVG = "{http://www.w3.org/2000/svg}"


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
    nll = [tuple(map(float, p.split(","))) for p in lines[0].get("points").split()]
    assert len(nll) == 3
    for x, y in nll + [tuple(map(float, p.split(","))) for p in lines[1].get("points").split()]:
        assert x0 - 1e-6 <= x <= x1 + 1e-6 and y0 - 1e-6 <= y <= y1 + 1e-6
    # The largest value is at the top of the frame, the first step at its left.
    assert nll[0] == (pytest.approx(x0), pytest.approx(y0))
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

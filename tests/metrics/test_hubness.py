import sys

import numpy as np
import pytest

from tf_outheads.metrics import hubness


def test_k_occurrence_by_hand():
    # Four unit vectors in the plane at 0, 10, 80 and 180 degrees. Nearest other
    # point by cosine: 0 -> 10, 10 -> 0, 80 -> 10, 180 -> 80 (cos -0.17 beats 10's -0.98).
    angles = np.deg2rad([0.0, 10.0, 80.0, 180.0])
    points = np.stack([np.cos(angles), np.sin(angles)], axis=1) * [[1.0], [2.0], [3.0], [0.5]]
    result = hubness(points, k=1)
    np.testing.assert_array_equal(result.k_occurrence, [1, 2, 1, 0])
    assert result.queries == 4
    assert result.anti_hub_fraction == 0.25
    assert result.top[0] == (1, 2)
    # Explicit queries: no point is left out, so each query finds itself.
    np.testing.assert_array_equal(hubness(points, queries=points, k=1).k_occurrence,
                                  [1, 1, 1, 1])
    # Queries near 80 degrees all retrieve candidate 2.
    near = np.stack([np.cos(np.deg2rad([75, 85, 79])), np.sin(np.deg2rad([75, 85, 79]))], 1)
    np.testing.assert_array_equal(hubness(points, queries=near, k=1).k_occurrence,
                                  [0, 0, 3, 0])


def test_skewness_matches_its_definition_and_flags_a_shared_direction():
    rng = np.random.default_rng(0)
    isotropic = rng.standard_normal((1500, 100))
    result = hubness(isotropic, k=10)
    counts = result.k_occurrence
    assert counts.sum() == 1500 * 10
    expected = np.mean((counts - counts.mean()) ** 3) / counts.std() ** 3
    assert result.skewness == pytest.approx(expected)
    # Vectors that share a common direction and vary along a few dominant ones, as word
    # vectors do: points near the mean become hubs.
    scales = np.linspace(3.0, 0.2, 100)
    anisotropic = rng.standard_normal((1500, 100)) * scales + 2.0
    skewed = hubness(anisotropic, k=10)
    assert skewed.skewness > result.skewness + 1.0
    assert skewed.hub_fraction > result.hub_fraction
    centred = hubness(anisotropic - anisotropic.mean(axis=0), k=10)
    assert centred.skewness < skewed.skewness - 1.0


def test_chunks_give_the_same_counts(monkeypatch):
    rng = np.random.default_rng(1)
    points = rng.standard_normal((300, 16))
    whole = hubness(points, k=5).k_occurrence
    # The module (the package's `hubness` attribute is the function).
    module = sys.modules["tf_outheads.metrics.hubness"]
    monkeypatch.setattr(module, "_CHUNK", 7)
    np.testing.assert_array_equal(hubness(points, k=5).k_occurrence, whole)


def test_summary_names_the_hubs():
    points = np.eye(3) + 0.1
    summary = hubness(points, k=1).as_dict(names=lambda index: "abc"[index], top=2)
    assert summary["k"] == 1 and summary["candidates"] == 3 and len(summary["top"]) == 2
    assert all(isinstance(name, str) for name, _ in summary["top"])


@pytest.mark.parametrize("kwargs, message", [
    ({"candidates": np.ones((3,))}, r"`candidates` must be a non-empty 2-D"),
    ({"candidates": np.full((3, 2), np.nan)}, r"`candidates` must be finite"),
    ({"candidates": np.ones((3, 2)), "k": 3}, r"`k` must be an int in \[1, 2\]"),
    ({"candidates": np.ones((3, 2)), "k": 0}, r"k=0"),
    ({"candidates": np.ones((3, 2)), "queries": np.ones((2, 3))}, r"`queries` must have"),
    ({"candidates": np.ones((3, 2)), "k": 1, "top": -1}, r"`top` must be"),
])
def test_errors_name_the_argument(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hubness(**kwargs)


def test_query_rows_count_only_those_queries():
    rng = np.random.default_rng(2)
    points = rng.standard_normal((200, 8))
    rows = np.array([3, 50, 199])
    counts = hubness(points, k=4, query_rows=rows).k_occurrence
    assert counts.sum() == 3 * 4
    # The same as giving those rows as queries, each leaving itself out.
    expected = np.zeros(200, dtype=int)
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    for row in rows:
        similarity = unit @ unit[row]
        similarity[row] = -np.inf
        expected[np.argsort(-similarity)[:4]] += 1
    np.testing.assert_array_equal(counts, expected)
    with pytest.raises(ValueError, match=r"`query_rows` must be"):
        hubness(points, k=4, query_rows=[200])
    with pytest.raises(ValueError, match=r"not both"):
        hubness(points, queries=points, k=4, query_rows=rows)

"""benchmarks/before_after.py's verdicts on per-round time ratios."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))

from before_after import add_relative, interval, t95  # noqa: E402


def test_an_interval_below_the_limit_holds():
    summary = interval([1.00, 1.01, 0.99, 1.00, 1.01], 1.03)
    assert summary["verdict"] == "holds"
    assert summary["low"] < summary["mean"] < summary["high"] <= 1.03
    # The t-interval of five rounds: mean ± 2.776 s / sqrt(5).
    assert summary["high"] - summary["mean"] == pytest.approx(2.776 * 0.008367 / 5 ** 0.5,
                                                              rel=1e-3)


def test_an_interval_above_the_limit_is_contradicted():
    assert interval([1.10, 1.12, 1.09, 1.11], 1.03)["verdict"] == "contradicted"


def test_a_wide_interval_is_inconclusive_and_says_how_many_rounds_would_settle_it():
    summary = interval([0.95, 1.05, 1.00, 1.04], 1.03)
    assert summary["verdict"] == "inconclusive"
    assert summary["low"] < 1.03 < summary["high"]
    # mean 1.01, sd 0.0455, distance to the limit 0.02: (1.96 * 0.0455 / 0.02) ** 2 -> 20.
    assert summary["rounds_needed"] == 20


def test_one_round_has_no_interval():
    assert interval([1.0], 1.03) == {"mean": 1.0, "low": None, "high": None,
                                     "verdict": "inconclusive", "rounds_needed": None}


def test_t_quantiles_fall_back_to_the_next_smaller_tabulated_df():
    assert t95(4) == 2.776 and t95(11) == t95(10) and t95(100) == 1.96


def test_a_row_relative_to_the_control_cancels_what_each_round_shared():
    # The machine slowed rounds 2 and 4 for both decoders; the SavedModel is 2 % slower.
    control = [1.00, 1.06, 0.98, 1.05]
    rows = [{"decoder": "translator", "beam_size": 1, "ratios": control},
            {"decoder": "savedmodel", "beam_size": 1, "ratios": [c * 1.02 for c in control]}]
    out = add_relative(rows, "translator", 1.03)
    assert "relative" not in out[0]
    relative = out[1]["relative"]
    assert relative["mean"] == pytest.approx(1.02) and relative["verdict"] == "holds"
    assert interval(rows[1]["ratios"], 1.03)["verdict"] == "inconclusive"
    with pytest.raises(ValueError, match="--control 'sampling'"):
        add_relative(rows, "sampling", 1.03)

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


def test_graph_fingerprints_ignore_names_and_tracing_order_but_not_ops_or_values():
    import tensorflow as tf
    from graph_fingerprint import graph_fingerprint

    def trace(body):
        return graph_fingerprint(tf.function(body).get_concrete_function(
            tf.TensorSpec([None], tf.float32)).graph.as_graph_def())

    def loop(x, scale=2.0):
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * scale), (0, x))[1]

    first = trace(loop)
    tf.function(lambda x: x + 1).get_concrete_function(tf.TensorSpec([None], tf.float32))
    again = trace(lambda x: loop(x))  # traced later: other function numbers and names
    assert again == first and first["ops"] > 10
    assert trace(lambda x: loop(x, 3.0))["sha1"] != first["sha1"]  # a constant's value
    assert trace(lambda x: loop(x) + 0.0)["sha1"] != first["sha1"]  # one op more


def test_same_graphs_compares_each_beam_width():
    from before_after import same_graphs

    fingerprint = {"decode": [{"ops": 3, "sha1": "a"}]}
    other = {"decode": [{"ops": 4, "sha1": "b"}]}
    assert same_graphs({"1": fingerprint, "5": fingerprint},
                       {"1": fingerprint, "5": other}) == {"1": True, "5": False}
    assert same_graphs({"1": fingerprint}, {}) == {"1": False}


@pytest.mark.slow  # builds a small tokenizer and traces an untrained model
def test_graph_fingerprint_traces_this_versions_translator(tmp_path):
    import json
    import os
    import subprocess

    script = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "graph_fingerprint.py"
    command = [sys.executable, str(script), "--quick", "--beams", "1,2", "--output",
               str(tmp_path / "unused.json")]
    runs = [subprocess.run(command, capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")) for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr[-3000:]
    first, second = (json.loads(run.stdout.strip().splitlines()[-1]) for run in runs)
    assert sorted(first) == ["1", "2"] and first == second  # deterministic across processes
    assert first["1"]["decode"][0]["sha1"] != first["2"]["decode"][0]["sha1"]

"""`benchmarks/vmf.py` runs end to end on its `--quick` sizes (a smoke test, no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "vmf.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
TFP_PYTHON = os.environ.get("TFP_PYTHON") or "/tmp/tfpvenv/bin/python"


def run_quick(tmp_path, *extra):
    output = tmp_path / "vmf.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--output", str(output), *extra],
        env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout, json.loads(output.read_text(encoding="utf-8"))


def test_quick_run_times_every_head_and_counts_the_output_layer(tmp_path):
    stdout, record = run_quick(tmp_path, "--no-tfp")
    config = record["config"]

    # (a) without tfp: our op only, timed with vmf_ops's functions, and a line saying why.
    ops = record["ops"]
    assert ops["tfp"]["available"] is False and ops["tfp"]["reason"] == "--no-tfp given"
    assert "part (a) has no tfp comparison: --no-tfp given" in stdout
    assert ops["comparisons"] == []
    assert [(r["op"], r["process"]) for r in ops["rows"]] == [("ours", "project venv")]
    row = ops["rows"][0]
    assert row["ms_per_call"]["median"] > 0
    assert row["accuracy"]["all_finite"] and row["accuracy"]["value_max_error"] < 1e-5

    # (b) every head at every |V|.
    assert sorted(record["model"], key=int) == [str(v) for v in config["vocab_list"]]
    hidden, m = config["hidden_dim"], config["output_dim"]
    for vocab, result in record["model"].items():
        vocab = int(vocab)
        rows = {r["head"]: r for r in result["rows"]}
        assert list(rows) == ["softmax", "tied", "continuous"]
        for name, row in rows.items():
            assert row["vocab"] == vocab
            assert row["ms_per_step"]["median"] > 0 and row["tokens_per_second_median"] > 0, name
            assert all(t > 0 for t in row["timings"]["seconds"]), name
            assert row["decode"]["sentences_per_second"]["median"] > 0, name
            assert row["parameters"]["total"] > row["parameters"]["output_layer_trainable"]
        assert rows["softmax"]["ratio_to_softmax"]["ratio_of_medians"] == 1.0
        assert rows["softmax"]["parameters"]["output_layer_trainable"] == vocab * hidden + vocab
        continuous = rows["continuous"]["parameters"]
        # d_h·m + m trainable; the (V, m) table frozen.
        assert continuous["output_layer_trainable"] == hidden * m + m
        assert continuous["output_layer_frozen"] == vocab * m
        assert rows["continuous"]["output_layer_cut_vs_softmax_percent"] > 90
    goals = record["goals"]["model"]
    assert goals["vocab"] == config["goal_vocab"] and goals["cut_met"]
    assert "goals:" in stdout and "cut >= 90%" in stdout

    # (c) the target table's hubness, per vector model and post-processing.
    table = record["table"]
    assert table["settings"]["sentences"] == 1500 and table["settings"]["k"] == 10
    assert [(r["model"], r["variant"]) for r in table["rows"]] == [
        ("fasttext", "plain"), ("fasttext", "center"), ("fasttext", "abtt3")]
    for row in table["rows"]:
        summary = row["hubness"]
        assert summary["candidates"] == row["pieces_with_vector"] > 100
        assert summary["queries"] == summary["candidates"]
        assert sum(count for _, count in summary["top"]) <= 10 * summary["queries"]
        assert set(row["eos_largest_cosine"]) == {"far", "file", "negative_period"}
    assert table["rows"][2]["remove_components"] == 3 and table["rows"][1]["center"]
    assert "TARGET TABLE HUBNESS" in stdout


@pytest.mark.skipif(not os.path.exists(TFP_PYTHON),
                    reason=f"no tensorflow-probability venv at {TFP_PYTHON}")
def test_quick_tfp_comparison_runs_in_the_side_venv(tmp_path):
    stdout, record = run_quick(tmp_path, "--tfp", "--tfp-python", TFP_PYTHON, "--no-model",
                               "--no-table")
    ops = record["ops"]
    assert ops["tfp"]["available"], ops["tfp"]
    processes = {(r["op"], r["process"]) for r in ops["rows"]}
    assert processes == {("ours", "project venv"), ("ours", "tfp venv"), ("tfp", "tfp venv")}
    (comparison,) = ops["comparisons"]
    assert comparison["speedup_vs_tfp"] > 0
    # The same op gives the same numbers in both environments.
    ours = [r["accuracy"] for r in ops["rows"] if r["op"] == "ours"]
    assert ours[0]["value_max_error"] == pytest.approx(ours[1]["value_max_error"], rel=1e-6)
    assert "goal (a)" in stdout

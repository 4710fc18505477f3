"""`benchmarks/training.py` runs end to end on its `--quick` sizes (a smoke test, no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "training.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_quick_run_times_every_loop_and_head_against_the_first_row(tmp_path):
    output = tmp_path / "training.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--output", str(output)],
        env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    config = record["config"]
    assert config["quick"] and config["loops_list"] == ["keras", "tf_outheads"]
    assert config["head_list"] == ["softmax", "joint32", "sampled5"]
    assert config["precision_list"] == ["float32"]
    rows = {row["variant"]: row for row in record["rows"]}
    assert list(rows) == config["variant_list"] == [
        f"{loop} / {head} / float32" for loop in ("keras", "tf_outheads")
        for head in ("softmax", "joint32", "sampled5")]
    assert record["strategy"]["replicas"] == 1

    # Both loops read the same batches: batch × length tokens (no padding) per batch.
    data = record["data"]
    per_batch = config["batch_size"] * config["target_length"]
    assert data["tokens_per_batch"] == [per_batch] * config["steps"]
    assert data["tokens_per_pass"] == per_batch * config["steps"]
    for name, row in rows.items():
        assert len(row["timings"]["seconds"]) == config["repeats"], name
        assert all(t > 0 for t in row["timings"]["seconds"]), name
        assert row["ms_per_step"]["median"] > 0 and row["tokens_per_second"]["median"] > 0, name
        assert row["warmup"]["seconds"] > 0, name
        # The in-loop clock runs inside the timed call.
        assert 0 < row["loop_ms_per_step"]["median"] <= row["ms_per_step"]["median"], name
    first = rows[config["variant_list"][0]]
    assert first["ratio_vs_first_row"]["ratio_of_medians"] == 1.0
    # sampled5 is the joint head (--sampled-joint-dim) with a 5 % sampled softmax.
    sampled = rows["tf_outheads / sampled5 / float32"]
    assert sampled["head_spec"] == {"class_name": "joint", "config": {"joint_dim": 32}}
    assert sampled["sampled_fraction"] == 0.05
    # Same seed, same first batch: both loops start from the same loss.
    for head in ("softmax", "joint32", "sampled5"):
        keras_loss = rows[f"keras / {head} / float32"]["warmup"]["loss"]
        ours = rows[f"tf_outheads / {head} / float32"]["warmup"]["loss"]
        assert abs(keras_loss - ours) < 1e-3 * abs(keras_loss), head
    assert "× first" in result.stdout and "--quick sizes: a smoke test" in result.stdout


def test_bad_variants_are_refused(tmp_path):
    for extra, message in (
            (["--heads", "softmax,joint"], "unknown ['joint']"),
            (["--loops", "keras,fast"], "unknown ['fast']"),
            (["--precision", "float16"], "unknown ['float16']"),
            (["--accumulation-steps", "2", "--strategy", "mirrored"],
             "--loops keras with --accumulation-steps > 1")):
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "--quick", *extra, "--output", str(tmp_path / "x.json")],
            env=ENV, capture_output=True, text=True, timeout=120)
        assert result.returncode == 2 and message in result.stderr, (extra, result.stderr)


def test_quick_run_of_the_xla_and_multi_step_loops(tmp_path):
    # The trainer's XLA step and several steps per call, on the full and the
    # sampled softmax. The tied head starts from the graph step's loss; the
    # sampled one under XLA takes a candidate set of static size (max(K, B·T)
    # rows, not K plus the distinct targets), so its loss differs.
    output = tmp_path / "training.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--dropout", "0",
         "--loops", "tf_outheads,tf_outheads-xla,tf_outheads-xla-spe",
         "--heads", "tied,sampled5", "--steps-per-execution", "2", "--output", str(output)],
        env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {row["variant"]: row for row in json.loads(output.read_text())["rows"]}
    for head in ("tied", "sampled5"):
        graph = rows[f"tf_outheads / {head} / float32"]["warmup"]["loss"]
        for loop in ("tf_outheads-xla", "tf_outheads-xla-spe"):
            row = rows[f"{loop} / {head} / float32"]
            assert row["tokens_per_second"]["median"] > 0, loop
            assert 0 < row["warmup"]["loss"] < 2 * graph, (loop, head)
            if head == "tied":
                assert abs(row["warmup"]["loss"] - graph) < 1e-4 * graph, loop

"""`benchmarks/baseline_stall.py` end to end on a tiny run: a model trained for 4 steps has
not learned to read its source, and the stall check (`tf_outheads_zoo.study.stall`) says
so from its real forced decoding (a planted stalled run, not a fabricated record)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "baseline_stall.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_a_four_step_run_is_flagged_stalled_with_its_attention_and_bleu(tmp_path):
    output = tmp_path / "stall.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--presets", "lstm-tiny", "--seeds", "1",
         "--steps", "4", "--eval-every", "2", "--runs-dir", str(tmp_path / "runs"),
         "--attention-sentences", "8", "--output", str(output)],
        env=ENV, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    (row,) = record["rows"]
    assert sorted(row["dev_bleu"]) == ["2", "4"]
    assert row["stalled"] is True and row["source_gain"] < 1.0
    assert "does not read its source" in row["reasons"][0]
    assert 0 <= row["attention"]["entropy"] <= 1.0001
    assert 0 <= row["attention"]["last_source_mass"] <= 1
    assert row["below_bar"] and record["summary"]["lstm-tiny"]["below_bar"] == 1
    assert "stalled" in result.stdout and "1 of 1 below 6.50" in result.stdout
    # Run again: the finished run is reused, not trained twice.
    log = (tmp_path / "runs" / "lstm-tiny" / "s1" / "train.log").read_text()
    again = subprocess.run(result.args, env=ENV, capture_output=True, text=True, timeout=900)
    assert again.returncode == 0
    assert (tmp_path / "runs" / "lstm-tiny" / "s1" / "train.log").read_text() == log

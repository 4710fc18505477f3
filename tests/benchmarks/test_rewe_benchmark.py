"""`benchmarks/rewe.py` runs end to end on its `--quick` sizes (a smoke test, no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "rewe.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_quick_run_times_every_variant_against_plain(tmp_path):
    output = tmp_path / "rewe.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--variants", "rewe,rewe-pretrained,contrastive-a",
         "--output", str(output)],
        env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    config = record["config"]
    assert config["quick"] and config["variant_list"] == ["plain", "rewe", "rewe-pretrained",
                                                          "contrastive-a"]
    rows = {row["variant"]: row for row in record["rows"]}
    assert list(rows) == config["variant_list"]

    d_h, u, m, vocab = (config["hidden_dim"], config["rewe_units"], config["embedding_dim"],
                        config["vocab_size"])
    plain = rows["plain"]["parameters"]
    assert plain["rewe"] == 0 and plain["inference"] == plain["total"]
    expected_rewe = {"rewe": d_h * u + u + u * m + m,
                     "rewe-pretrained": d_h * u + u + u * m + m + vocab * m,
                     "contrastive-a": 0}
    for name, row in rows.items():
        assert row["ms_per_step"]["median"] > 0 and row["tokens_per_second_median"] > 0, name
        assert len(row["timings"]["seconds"]) == config["repeats"], name
        assert all(t > 0 for t in row["timings"]["seconds"]), name
        # Inference never sees the ReWE head: the plain model's parameters.
        assert row["parameters"]["inference"] == plain["total"], name
        assert row["parameters"]["rewe"] == expected_rewe.get(name, 0), name
        if name != "plain":
            assert {"logits_loss", "rewe_loss"} <= set(row["last_logs"]), name
    assert rows["plain"]["overhead_vs_plain"]["ratio_of_medians_minus_one"] == 0.0
    assert rows["rewe-pretrained"]["parameters"]["rewe_trainable"] == expected_rewe["rewe"]

    goal = record["goal"]
    assert goal["variant"] == "rewe" and goal["goal"] == 0.05
    assert goal["overhead"] == rows["rewe"]["overhead_vs_plain"]["ratio_of_medians_minus_one"]
    assert goal["met"] == (goal["overhead"] <= 0.05)
    stdout = result.stdout
    assert "variant" in stdout and "overhead" in stdout and "goal: ReWE training-step overhead" in stdout
    assert "--quick sizes: a smoke test" in stdout


def test_unknown_variant_is_refused(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--variants", "rewe,nope",
         "--output", str(tmp_path / "x.json")],
        env=ENV, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "unknown ['nope']" in result.stderr

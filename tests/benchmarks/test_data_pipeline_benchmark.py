"""`benchmarks/data_pipeline.py` runs end to end on its `--quick` sizes (a smoke test, no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "data_pipeline.py"


def test_quick_run_measures_every_size_in_its_own_process(tmp_path):
    output = tmp_path / "data_pipeline.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--output", str(output),
         "--work-dir", str(tmp_path / "work")],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True,
        timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    rows = record["rows"]
    assert [row["pairs"] for row in rows] == [2000, 8000]
    for row in rows:
        # The corpus written has the size asked for, and the scan read all of it.
        with open(tmp_path / "work" / f"pairs-{row['pairs']}" / "corpus" / "train.en") as f:
            assert sum(1 for _ in f) == row["pairs"]
        assert 0.9 * row["pairs"] < row["kept_pairs"] <= row["pairs"]
        assert row["tokenizer_sample"] == 1000
        assert row["peak_rss_mb"] > 100 and row["backup_bytes"] > 0
        assert row["pipeline_tokens_per_second"] > 0 and row["model_tokens_per_second"] > 0
    assert set(record["checks"]) >= {"rss_ratio_largest_to_smallest", "pipeline_at_least_5x_model"}
    assert "| 8,000 |" in result.stdout

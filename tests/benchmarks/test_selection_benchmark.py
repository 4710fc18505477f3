"""`benchmarks/selection.py` runs end to end on its `--quick` sizes (a smoke test, no timing
asserted): every variant decodes, `full` is its own reference."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "selection.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_quick_run_decodes_with_every_selection_and_compares_to_full(tmp_path):
    output = tmp_path / "selection.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--output", str(output)],
                            env=ENV, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    rows = record["rows"]
    assert [(row["beam"], row["variant"]) for row in rows] == [
        (1, "full"), (1, "lexical"), (1, "neural")]
    full = rows[0]
    assert full["speed_vs_full"] == 1.0 and full["identical_to_full"] == 1.0
    assert full["recall"] == 1.0 and full["candidates"] == 500
    for row in rows[1:]:
        assert 0 < row["candidates"] < 500 and 0.0 < row["recall"] <= 1.0
        assert row["pieces_per_second"] > 0 and row["speed_vs_full"] > 0
    assert record["selections"]["neural"]["method"] == "neural"

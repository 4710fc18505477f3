"""`benchmarks/quantize.py` runs end to end on its `--quick` sizes (a smoke test, no timing
asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "quantize.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_quick_run_times_the_products_and_both_models(tmp_path):
    output = tmp_path / "quantize.json"
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--output", str(output)],
                            env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    products = record["products"]
    # The LSTM's gate, attention and output kernels, and the output layer.
    assert len(products) >= 3 and products[-1]["product"].startswith("output ")
    for row in products:
        assert row["float32"] > 0 and row["int8"] > 0 and row["weight-only"] > 0
    assert [row["model"] for row in record["greedy"]] == ["float32", "int8"]
    for row in record["greedy"]:
        assert row["sentences"] == 8 and row["sentences_per_second"] > 0
        assert 0.0 <= row["identical_to_float"] <= 1.0 and row["bleu"] is None
    assert record["greedy"][0]["identical_to_float"] == 1.0
    assert "(b) greedy Translator" in result.stdout

"""`benchmarks/shared_private.py` runs end to end on its `--quick` sizes (no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "shared_private.py"


def test_quick_run_times_every_variant(tmp_path):
    output = tmp_path / "shared_private.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--variants",
         "decoder-wt,shared-private,three-way", "--output", str(output)],
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"), capture_output=True, text=True,
        timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    config = record["config"]
    rows = {row["variant"]: row for row in record["rows"]}
    assert list(rows) == ["vanilla", "decoder-wt", "shared-private", "three-way"]
    v, d = config["vocab_size"], config["model_dim"]
    embeddings = {name: row["parameters"]["embeddings"] for name, row in rows.items()}
    assert embeddings["vanilla"] == embeddings["decoder-wt"] == 2 * v * d
    assert embeddings["three-way"] == v * d
    assert v * d < embeddings["shared-private"] < 2 * v * d
    # The untied softmax has its own V·d matrix; the tied heads only a bias.
    assert rows["vanilla"]["parameters"]["output_layer"] == v * d + v
    assert rows["shared-private"]["parameters"]["output_layer"] == v
    for row in rows.values():
        for task in ("training", "greedy", "beam"):
            assert row[task]["ms"]["median"] > 0
            assert row[task]["vs_vanilla"]["throughput_ratio"] > 0
    assert "shared-private training:" in result.stdout

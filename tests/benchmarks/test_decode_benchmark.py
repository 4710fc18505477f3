"""`benchmarks/decode.py` runs end to end on its `--quick` sizes (a smoke test, no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "decode.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_quick_run_times_both_decoders_and_the_bookkeeping(tmp_path):
    output = tmp_path / "decode.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--output", str(output),
         "--export-dir", str(tmp_path / "export")],
        env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    beams = record["config"]["beams"]
    assert beams == [1, 4]

    rows = record["throughput"]["rows"]
    assert [(r["decoder"], r["beam_size"]) for r in rows] == [
        (decoder, k) for k in beams for decoder in ("translator", "savedmodel")] + [
        ("sampling", 1), ("scoring", 0)]
    for row in rows:
        assert row["sentences"] == record["config"]["sentences"] == 8
        assert row["sentences_per_second"] > 0 and row["target_tokens_per_second"] > 0
        assert row["same_strings_as_translator"] is (
            None if row["decoder"] in ("sampling", "scoring") else True)
    assert (tmp_path / "export" / "1" / "saved_model.pb").exists()

    bookkeeping = record["bookkeeping"]["rows"]
    assert [r["beam_size"] for r in bookkeeping] == beams
    for row in bookkeeping:
        assert row["ms_per_step_model"] > 0 and row["ms_per_step_trivial"] > 0
        assert 0 < row["bookkeeping_share"]
        assert abs(row["bookkeeping_share"] + row["model_step_share"] - 1) < 1e-9 or \
            row["model_step_share"] == 0.0

    assert record["caveat"].startswith("untrained model")
    out = result.stdout
    assert "=== DECODING THROUGHPUT ===" in out and "=== SEARCH BOOKKEEPING ===" in out
    assert "caveat: untrained model" in out

"""`benchmarks/sampled.py` runs end to end on its `--quick` sizes (a smoke test, no timing asserted)."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "sampled.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")


def test_quick_run_writes_a_row_per_head_vocabulary_and_fraction(tmp_path):
    output = tmp_path / "sampled.json"
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--no-memory", "--output", str(output)],
        env=ENV, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    record = json.loads(output.read_text(encoding="utf-8"))
    config = record["config"]
    heads = list(record["heads"])
    assert heads == ["softmax", "tied"] + [f"joint({d})" for d in config["joint_list"]]
    rows_wanted = ["full"] + [f"{100 * p:g}%" for p in config["fraction_list"]]
    assert rows_wanted == ["full", "50%", "25%", "5%"]

    seen = {}
    for vocab, result_v in record["output_layer"].items():
        for row in result_v["rows"]:
            seen[(row["head"], int(vocab), row["row"])] = row
    wanted = {(h, v, r) for h in heads for v in config["vocab_list"] for r in rows_wanted}
    assert set(seen) == wanted
    for key, row in seen.items():
        assert row["vocab"] == key[1]
        assert row["ms_per_step"]["median"] > 0, key
        assert all(t > 0 for t in row["timings"]["seconds"]), key
        assert row["optimizer_apply_ms"]["median"] > 0, key
        assert row["tokens_per_second_median"] > 0, key
        if row["row"] == "full":
            assert row["candidates_mean"] == key[1]
            assert row["speedup_vs_own_full"]["ratio_of_medians"] == 1.0
        else:
            assert 0 < row["candidates_mean"] < key[1]
    # The sparse gradients of a sampled step were seen in the traced graph.
    assert "IndexedSlices" in record["optimizer_update"]["gradient_types"].values()

    for vocab, result_v in record["model"].items():
        assert result_v["rows"], vocab
        for row in result_v["rows"]:
            assert row["ms_per_step"]["median"] > 0
    assert record["memory"] is None
    assert "goals at |V|" in result.stdout


def test_memory_probe_child_reports_its_peak():
    spec = json.dumps({"head": "joint(32)", "vocab": 500, "fraction": 0.05})
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--probe", spec], env=ENV,
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("SAMPLED_PROBE ")]
    assert len(lines) == 1, result.stdout
    probe = json.loads(lines[0].split(" ", 1)[1])
    assert probe["head"] == "joint(32)" and probe["fraction"] == 0.05
    assert probe["peak_maxrss_kb"] >= probe["built_maxrss_kb"] >= probe["import_maxrss_kb"] > 0

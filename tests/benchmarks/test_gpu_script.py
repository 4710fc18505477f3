"""`benchmarks/gpu.sh --dry-run`: every GPU measurement's command runs at --quick sizes."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gpu.sh"


def test_dry_run_runs_every_measurement_and_gathers_them(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHON=sys.executable)
    result = subprocess.run(["bash", str(SCRIPT), "--dry-run", "--out", str(tmp_path)],
                            env=env, capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    record = json.loads((tmp_path / "gpu.json").read_text())
    assert record["dry_run"] is True
    runs = record["runs"]
    lstm = {row["variant"] for row in runs["training-lstm-pappas"]["rows"]}
    assert lstm == {f"{loop} / {head} / {precision}"
                    for loop in ("tf_outheads", "tf_outheads-xla")
                    for head in ("softmax", "tied", "joint32", "sampled5")
                    for precision in ("float32", "mixed_float16", "mixed_bfloat16")}
    assert runs["training-lstm-pappas"]["config"]["num_layers"] == 2
    assert runs["training-lstm-pappas"]["config"]["unidirectional_encoder"] is True
    transformer = runs["training-transformer-base"]
    assert transformer["config"]["model"] == "transformer"
    assert len(transformer["rows"]) == 2 * 2 * 3
    for name in ("training-lstm-pappas", "training-transformer-base"):
        assert all(row["tokens_per_second"]["median"] > 0 for row in runs[name]["rows"]), name
    for name in ("decode-lstm-pappas", "decode-transformer-base"):
        rows = runs[name]["throughput"]["rows"]
        searches = [row for row in rows if row["decoder"] in ("translator", "savedmodel")]
        assert {row["beam_size"] for row in searches} == {1, 4}, name
        # decode.py's other rows: sampling (width 1) and forced-decoding scoring.
        assert sorted((row["decoder"], row["beam_size"]) for row in rows
                      if row not in searches) == [("sampling", 1), ("scoring", 0)], name
    assert "transformer" in runs["decode-transformer-base"]["config"]["preset"]


def test_without_a_gpu_it_refuses_to_measure(tmp_path):
    env = dict(os.environ, PYTHON=sys.executable, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(["bash", str(SCRIPT), "--out", str(tmp_path)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert "no GPU" in result.stderr and not list(tmp_path.iterdir())

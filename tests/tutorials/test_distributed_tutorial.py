"""The distributed-training tutorial runs end to end on 2 logical CPUs and 2 local workers."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.tutorials.output import section

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow

TUTORIAL = pathlib.Path(__file__).resolve().parents[2] / "tutorials" / "08_distributed_training.py"


@pytest.fixture(scope="module")
def output(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("distributed-tutorial")
    env = dict(os.environ, DISTRIBUTED_TUTORIAL_TINY="1", DISTRIBUTED_TUTORIAL_RUN_DIR=str(run_dir),
               TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    result = subprocess.run([sys.executable, str(TUTORIAL)], env=env, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def _number(pattern, text):
    match = re.search(pattern, text, re.M)
    assert match, f"{pattern!r} not in:\n{text}"
    return float(match.group(1))


def test_two_replicas_train_like_one_device(output):
    text = section(output, "=== MIRRORED ===")
    assert "replicas: 2 on" in text
    assert _number(r"^max \|weight difference\| 1 device vs 2 replicas: (\S+)$", text) < 1e-4


def test_two_workers_identical_and_like_one_device(output):
    text = section(output, "=== MULTI-WORKER ===")
    assert "worker exit codes: [0, 0]" in text
    assert "replicas in the job: 2" in text
    assert "workers' weights identical: True" in text
    assert _number(r"^max \|weight difference\| workers vs 1 device: (\S+)$", text) < 1e-4


def test_mixed_precision_and_accumulation(output):
    text = section(output, "=== PRECISION ===")
    assert re.search(r"^mixed_float16: optimizer LossScaleOptimizer, variables float32, loss \d",
                     text, re.M)
    assert re.search(r"^mixed_bfloat16: optimizer Adam, variables float32, loss \d", text, re.M)
    assert re.search(r"^accumulation_steps=2: 3 updates from 6 global batches", text, re.M)


def test_crash_resumes_to_the_same_weights(output):
    text = section(output, "=== RESUME ===")
    assert "crashed: simulated crash at step 5" in text
    assert "[backup] resumed from step 4 (epoch 2, batch 0)" in text
    assert _number(r"^max \|weight difference\| resumed vs uninterrupted: (\S+)$", text) == 0.0
    assert re.search(r"^CheckpointError: .*ckpt-000000008/variables\.data-\S+: truncated or "
                     r"overwritten: \d+ bytes.*The previous backup is .*ckpt-000000006", text,
                     re.M)


def test_averaged_backups_translate(output):
    text = section(output, "=== AVERAGE ===")
    assert re.search(r"^average of 2: dev BLEU \d+\.\d\d \(20 verses\)$", text, re.M)
    assert "averaged: ['ckpt-000000004', 'ckpt-000000006']" in text

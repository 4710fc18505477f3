"""`tf-outheads train --strategy multi_worker`: two worker processes on 127.0.0.1."""

import json
import os
import sys

from tests.corpus import write_corpus_slice
from tests.workers import run_workers

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow


def test_two_workers_share_the_chiefs_tokenizer_and_one_run(tmp_path):
    corpus = write_corpus_slice(tmp_path / "small.tsv", 600, 30, 30)
    run_dir = tmp_path / "run"
    run_workers([sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", "lstm-tiny",
                 "--run-dir", str(run_dir), "--corpus", corpus, "--strategy", "multi_worker",
                 "--max-steps", "6", "--set", "data.vocab_size=400",
                 "--set", "train.steps_per_epoch=3", "--set", "decode.max_length_offset=3"],
                env=dict(os.environ, TF_OUTHEADS_QUIET="1"))
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 6 and results["replicas"] == 2
    assert sorted(os.listdir(run_dir / "backup"))[-1] == "ckpt-000000006"
    worker = run_dir / "workers" / "1"
    # The other worker loaded the chief's tokenizer and wrote only its own logs.
    assert not (worker / "tokenizer.json").exists() and not (worker / "model.keras").exists()
    assert json.loads((worker / "preset.json").read_text())["train"]["strategy"] == "multi_worker"

"""`tf-outheads train --strategy multi_worker`: two worker processes on 127.0.0.1."""

import json
import os
import sys

from tests.corpus import write_corpus_slice
from tests.workers import run_workers
from tf_outheads import data

import pytest

# End-to-end (subprocesses, tutorials or benchmark runs): `pytest -m slow`.
pytestmark = pytest.mark.slow


def test_two_workers_share_the_chiefs_tokenizer_and_one_run(tmp_path):
    # The training set as text files: each worker reads its own shard of the lines.
    corpus = write_corpus_slice(tmp_path / "small.tsv", 600, 30, 30)
    train = data.read_tsv(corpus, split="train")
    for name, texts in (("train.es", train.sources), ("train.en", train.targets)):
        (tmp_path / name).write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    files = json.dumps({"source": str(tmp_path / "train.es"), "target": str(tmp_path / "train.en")})
    run_dir = tmp_path / "run"
    outputs = run_workers([
        sys.executable, "-m", "tf_outheads_zoo.cli", "train", "--preset", "lstm-tiny",
        "--run-dir", str(run_dir), "--corpus", corpus, "--strategy", "multi_worker",
        "--max-steps", "6", "--set", "data.vocab_size=400", "--set", f"data.train={files}",
        "--set", "train.steps_per_epoch=3", "--set", "decode.max_length_offset=3"],
        env=dict(os.environ, TF_OUTHEADS_QUIET="1"))
    for index, output in enumerate(outputs):
        assert f"worker {index} of 2: reads the lines whose position modulo 2" in output
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 6 and results["replicas"] == 2
    assert sorted(n for n in os.listdir(run_dir / "backup") if n.startswith("ckpt-"))[-1] == \
        "ckpt-000000006"
    # Each worker backed up its own data position next to the chief's backup.
    for index in (0, 1):
        assert "ckpt-000000006" in os.listdir(run_dir / "backup" / "iterators" / f"worker-{index}")
    worker = run_dir / "workers" / "1"
    # The other worker loaded the chief's tokenizer and wrote only its own logs.
    assert not (worker / "tokenizer.json").exists() and not (worker / "model.keras").exists()
    assert json.loads((worker / "run.json").read_text())["train"]["strategy"] == "multi_worker"

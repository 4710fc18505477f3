"""`tf-outheads train --strategy multi_worker`: two worker processes on 127.0.0.1."""

import json
import os
import socket
import subprocess
import sys

from tests.corpus import write_corpus_slice


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_two_workers_share_the_chiefs_tokenizer_and_one_run(tmp_path):
    corpus = write_corpus_slice(tmp_path / "small.tsv", 600, 30, 30)
    run_dir = tmp_path / "run"
    workers = [f"127.0.0.1:{_free_port()}" for _ in range(2)]
    processes = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(config), TF_OUTHEADS_QUIET="1",
                   TF_CPP_MIN_LOG_LEVEL="2")
        processes.append(subprocess.Popen(
            [sys.executable, "-m", "zoo.cli", "train", "--preset", "lstm-tiny", "--run-dir",
             str(run_dir), "--corpus", corpus, "--strategy", "multi_worker", "--max-steps", "6",
             "--set", "data.vocab_size=400", "--set", "train.steps_per_epoch=3",
             "--set", "decode.max_length_offset=3"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    for process in processes:
        try:
            output, _ = process.communicate(timeout=600)
        except subprocess.TimeoutExpired:
            for each in processes:
                each.kill()
            raise
        assert process.returncode == 0, output[-4000:]
    results = json.loads((run_dir / "results.json").read_text())
    assert results["steps"] == 6 and results["replicas"] == 2
    assert sorted(os.listdir(run_dir / "backup"))[-1] == "ckpt-000000006"
    worker = run_dir / "workers" / "1"
    # The other worker loaded the chief's tokenizer and wrote only its own logs.
    assert not (worker / "tokenizer.json").exists() and not (worker / "model.keras").exists()
    assert json.loads((worker / "preset.json").read_text())["train"]["strategy"] == "multi_worker"

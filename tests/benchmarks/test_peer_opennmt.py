"""`benchmarks/peer_opennmt.py`: the peer's configuration and the speed bookkeeping.

OpenNMT-py itself is not installed for the tests (the benchmark is not part of CI);
what is tested is what decides the comparison: that the peer gets the preset's
shape and recipe, and that tokens/s are read from both sides' logs correctly.
"""

import importlib.util
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "peer_opennmt.py"


@pytest.fixture(scope="module")
def peer():
    spec = importlib.util.spec_from_file_location("peer_opennmt", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


PEER_LOG = """\
[2026-11-25 04:22:05,939 INFO] Step 50/  300; acc: 9.4; ppl: 657.8; xent: 6.5; lr: 0.00500; \
sents:    3131; bsz: 1802/1860/63; 1902/1963 tok/s;     47 sec;
[2026-11-25 04:22:18,003 INFO] Step 100/  300; acc: 19.4; ppl: 252.3; xent: 5.5; lr: 0.00500; \
sents:    3220; bsz: 1872/1896/64; 7761/7857 tok/s;     59 sec;
[2026-11-25 04:22:30,688 INFO] Step 150/  300; acc: 21.9; ppl: 173.4; xent: 5.2; lr: 0.00500; \
sents:    3124; bsz: 1904/1919/62; 7507/7567 tok/s;     72 sec;
"""


def test_peer_log_lines_are_parsed(peer):
    reports = peer.parse_peer_log(PEER_LOG)
    assert reports == [(50, 6.5, 1902, 1963, 47), (100, 5.5, 7761, 7857, 59),
                       (150, 5.2, 7507, 7567, 72)]
    # After step 50: 12 s at 7,857 and 13 s at 7,567 target tokens/s.
    assert peer.peer_train_speed(reports) == pytest.approx((7857 * 12 + 7567 * 13) / 25)


def test_our_speed_skips_the_first_steps_and_evaluations(peer, tmp_path):
    curves = tmp_path / "loss_curves.csv"
    rows = ["step,epoch,loss,tokens,time"]
    # Steps 49-52 in epoch 1, one second apart; an evaluation of 100 s before epoch 2.
    for step, epoch, time in ((49, 1, 0.0), (50, 1, 1.0), (51, 1, 2.0), (52, 1, 3.0),
                              (53, 2, 103.0), (54, 2, 104.0)):
        rows.append(f"{step},{epoch},5.0,1000,{time}")
    curves.write_text("\n".join(rows) + "\n")
    # Counted: 50→51, 51→52, 53→54 (1 s each, 1,000 tokens); not 49→50 nor 52→53.
    assert peer.our_train_speed(str(curves)) == pytest.approx(1000.0)
    assert peer.our_loss_reports(str(curves), every=3) == [(51, 5.0), (54, 5.0)]


def test_peer_config_follows_the_preset(peer, tmp_path):
    from tf_outheads_zoo.presets import get_preset

    vocab = tmp_path / "vocab.joint"
    vocab.write_text("".join(f"p{i}\n" for i in range(3996)))
    data = {"vocab": str(vocab), "files": {"train.src": "a", "train.tgt": "b"}}
    tied = peer.peer_config(get_preset("lstm-cpu-tied"), data, str(tmp_path), 1500, 300, 7)
    assert tied["src_vocab_size"] == tied["tgt_vocab_size"] == 4000
    assert (tied["encoder_type"], tied["hidden_size"], tied["word_vec_size"]) == ("brnn", 256,
                                                                                  256)
    assert tied["enc_layers"] == tied["dec_layers"] == 1
    assert tied["share_decoder_embeddings"] == "true"
    assert tied["max_grad_norm"] == 5.0 and tied["param_init"] == 0.1
    assert tied["batch_size"] == 2048 and tied["label_smoothing"] == 0.1
    assert tied["learning_rate"] == 5e-3 and tied["dropout"] == [0.1]
    assert (tied["train_steps"], tied["save_checkpoint_steps"], tied["seed"]) == (1500, 300, 7)
    untied = peer.peer_config(get_preset("lstm-cpu-softmax"), data, str(tmp_path), 300, 300, 1)
    assert untied["share_decoder_embeddings"] == "false"
    yaml = peer._yaml(untied)
    assert "data:\n  corpus_1:\n    path_src: \"a\"" in yaml and "dropout: [0.1]" in yaml
    with pytest.raises(SystemExit, match="untied .* or tied head only"):
        peer.peer_config(get_preset("lstm-cpu"), data, str(tmp_path), 300, 300, 1)


def test_missing_peer_environment_is_named(tmp_path):
    missing = tmp_path / "nothing" / "python"
    result = subprocess.run([sys.executable, str(SCRIPT), "--peer-python", str(missing),
                             "--output", str(tmp_path / "x.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"--peer-python {missing}: no such file" in result.stderr
    assert "peer_setup" not in result.stdout

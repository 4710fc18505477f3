"""`benchmarks/peer_opennmt.py`: the peer's configuration and the speed bookkeeping.

OpenNMT-py itself is not installed for the tests (the benchmark is not part of CI);
what is tested is what decides the comparison: that the peer gets the preset's
shape and recipe, and that tokens/s are read from both sides' logs correctly.
"""

import importlib.util
import os
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
    # Each report after step 50 is one window: its own target tokens/s.
    assert peer.peer_window_speeds(reports) == [7857, 7567]
    assert peer.peer_window_speeds(reports, warmup=100) == [7567]
    with pytest.raises(ValueError, match="no report of the peer after step 150"):
        peer.peer_window_speeds(reports, warmup=150)


def test_our_windows_skip_the_first_steps_and_evaluations(peer, tmp_path):
    curves = tmp_path / "loss_curves.csv"
    rows = ["step,epoch,loss,tokens,time"]
    # Steps 49-52 in epoch 1, one second apart; an evaluation of 100 s before epoch 2,
    # whose steps take 0.5 s.
    for step, epoch, time in ((49, 1, 0.0), (50, 1, 1.0), (51, 1, 2.0), (52, 1, 3.0),
                              (53, 2, 103.0), (54, 2, 103.5), (55, 2, 104.0), (56, 2, 104.5)):
        rows.append(f"{step},{epoch},5.0,1000,{time}")
    curves.write_text("\n".join(rows) + "\n")
    # Windows 51-53 and 54-56: 53 opens an epoch (left out); 2,000 tokens in 2 s, then
    # 3,000 in 1.5 s.
    curve = peer.read_curve(str(curves))
    assert peer.window_speeds(curve, peer.WARMUP, window=3) == pytest.approx([1000.0, 2000.0])
    assert peer.window_speeds(curve, warmup=52, window=2) == pytest.approx([2000.0, 2000.0])
    assert peer.our_loss_reports(str(curves), every=3) == [(51, 5.0), (54, 5.0), (56, 5.0)]
    assert peer.report_every(100) == 25 and peer.report_every(60) == 10


def test_peer_config_follows_the_preset(peer, tmp_path):
    from tf_outheads_zoo.presets import preset_config

    vocab = tmp_path / "vocab.joint"
    vocab.write_text("".join(f"p{i}\n" for i in range(3996)))
    data = {"vocab": str(vocab), "src_vocab": str(vocab), "tgt_vocab": str(vocab),
            "files": {"train.src": "a", "train.tgt": "b"}}
    tied = peer.peer_config(preset_config("lstm-cpu-tied"), data, str(tmp_path), 1500, 300, 7)
    assert tied["src_vocab_size"] == tied["tgt_vocab_size"] == 4000
    assert (tied["encoder_type"], tied["hidden_size"], tied["word_vec_size"]) == ("brnn", 256,
                                                                                  256)
    assert tied["enc_layers"] == tied["dec_layers"] == 1
    assert tied["share_decoder_embeddings"] == "true"
    assert tied["max_grad_norm"] == 5.0 and tied["param_init"] == 0.1
    assert tied["batch_size"] == 2048 and tied["label_smoothing"] == 0.1
    assert tied["learning_rate"] == 5e-3 and tied["dropout"] == [0.1]
    assert (tied["train_steps"], tied["save_checkpoint_steps"], tied["seed"]) == (1500, 300, 7)
    assert (tied["decay_method"], tied["start_decay_steps"]) == ("none", 1000000)
    # A preset's inverse-sqrt warm-up is OpenNMT-py's noam over the hidden size, as ours.
    warm = peer.peer_config(preset_config("lstm-cpu-tied", {"train.learning_rate_schedule": {
        "name": "inverse_sqrt", "warmup_steps": 200, "scale": 1.13}}), data, str(tmp_path),
        600, 300, 7)
    assert (warm["decay_method"], warm["warmup_steps"], warm["learning_rate"]) == (
        "noam", 200, 1.13)
    with pytest.raises(SystemExit, match="inverse-sqrt"):
        peer.peer_config(preset_config("lstm-cpu-tied", {"train.learning_rate_schedule": {
            "name": "inverse_sqrt", "warmup_steps": 200, "model_dim": 512}}), data,
            str(tmp_path), 600, 300, 7)
    untied = peer.peer_config(preset_config("lstm-cpu-softmax"), data, str(tmp_path), 300, 300, 1)
    assert untied["share_decoder_embeddings"] == "false"
    yaml = peer._yaml(untied)
    assert "data:\n  corpus_1:\n    path_src: \"a\"" in yaml and "dropout: [0.1]" in yaml
    with pytest.raises(SystemExit, match="untied .* or tied head only"):
        peer.peer_config(preset_config("lstm-cpu"), data, str(tmp_path), 300, 300, 1)


def test_separate_vocabularies_give_the_peer_one_vocabulary_a_side(peer, tmp_path):
    from tf_outheads_zoo.presets import preset_config

    source, target = tmp_path / "vocab.src", tmp_path / "vocab.tgt"
    source.write_text("".join(f"s{i}\n" for i in range(3996)))
    target.write_text("".join(f"t{i}\n" for i in range(2996)))
    data = {"vocab": str(target), "src_vocab": str(source), "tgt_vocab": str(target),
            "files": {"train.src": "a", "train.tgt": "b"}}
    config = peer.peer_config(preset_config("lstm-cpu-vmf-softmax"), data, str(tmp_path), 600,
                              300, 1)
    assert (config["src_vocab"], config["tgt_vocab"]) == (str(source), str(target))
    assert (config["src_vocab_size"], config["tgt_vocab_size"]) == (4000, 3000)
    assert config["share_decoder_embeddings"] == "true" and "share_vocab" not in config


def test_transformer_peer_follows_the_preset(peer, tmp_path):
    from tf_outheads_zoo.presets import preset_config

    vocab = tmp_path / "vocab.joint"
    vocab.write_text("".join(f"p{i}\n" for i in range(3996)))
    data = {"vocab": str(vocab), "src_vocab": str(vocab), "tgt_vocab": str(vocab),
            "files": {"train.src": "a", "train.tgt": "b"}}
    config = peer.peer_config(preset_config("transformer-cpu"), data, str(tmp_path), 600, 300, 3)
    assert (config["encoder_type"], config["decoder_type"]) == ("transformer", "transformer")
    assert (config["enc_layers"], config["dec_layers"], config["heads"]) == (3, 3, 4)
    assert (config["hidden_size"], config["word_vec_size"], config["transformer_ff"]) == (
        256, 256, 1024)
    assert config["dropout"] == [0.1] and config["attention_dropout"] == [0.1]
    # The preset's inverse-sqrt schedule is OpenNMT-py's noam with the same scale.
    assert (config["decay_method"], config["warmup_steps"], config["learning_rate"]) == (
        "noam", 800, 1.0)
    assert config["adam_beta2"] == 0.98 and config["max_grad_norm"] == 0
    assert config["param_init_glorot"] == "true" and config["param_init"] == 0
    assert config["batch_size"] == 4096 and config["share_decoder_embeddings"] == "false"
    assert "rnn_type" not in config and "input_feed" not in config
    with pytest.raises(SystemExit, match="pre-norm"):
        peer.peer_config(preset_config("transformer-base"), data, str(tmp_path), 300, 300, 1)


def test_flops_are_counted_from_the_shapes(peer):
    from tf_outheads_zoo.config import RunConfig

    lstm = RunConfig().with_overrides({
        "model.model_type": "lstm", "model.embedding_dim": 4, "model.hidden_dim": 6,
        "model.num_layers": 1, "model.bidirectional_encoder": True,
        "model.input_feeding": True, "model.attention_score": "general"}).model
    flops = peer.forward_flops(lstm, vocab_size=10, source_length=5, target_length=7)
    # Encoder: 2 directions × 2·(4 + 3)·12; keys 2·6·6.
    assert flops["per_source"] == 2 * 2 * 7 * 12 + 2 * 36
    # Decoder: 2·(4 + 6 + 6)·24; attention 2·2·5·6; W_c 2·12·6; output 2·6·10.
    assert flops["per_target"] == 2 * 16 * 24 + 2 * 2 * 5 * 6 + 2 * 12 * 6 + 2 * 6 * 10
    # Training: 3 × forward, the source side per target token.
    assert peer.train_flops_per_target_token(lstm, 10, {"source": 5, "target": 7}) == (
        3 * (flops["per_target"] + flops["per_source"] * 5 / 7))
    transformer = RunConfig().with_overrides({
        "model.model_type": "transformer", "model.model_dim": 8, "model.ffn_dim": 16,
        "model.num_heads": 2, "model.encoder_layers": 2, "model.decoder_layers": 1}).model
    flops = peer.forward_flops(transformer, vocab_size=10, source_length=5, target_length=7)
    assert flops["per_source"] == 2 * (2 * 4 * 64 + 2 * 2 * 8 * 16 + 2 * 2 * 5 * 8) + 2 * 2 * 64
    assert flops["per_target"] == (2 * 4 * 64 + 2 * 2 * 7 * 8 + 2 * 2 * 64 + 2 * 2 * 5 * 8
                                   + 2 * 2 * 8 * 16 + 2 * 8 * 10)
    # Decoding: a step attends to half the output on average.
    work = peer.decode_flops(transformer, 10, source_tokens=50, output_tokens=140, sentences=10)
    half = peer.forward_flops(transformer, 10, 5.0, 7.0)
    assert work == half["per_source"] * 50 + half["per_target"] * 140


def test_flops_entry_and_decode_counts(peer, tmp_path):
    class Pieces:
        def encode(self, lines):
            return [line.split() for line in lines]

    sources = tmp_path / "in.sp"
    sources.write_text("a b c\nd e\n")
    ours = tmp_path / "ours.txt"
    ours.write_text("x y z w\nq\n")
    theirs = tmp_path / "peer.sp"
    theirs.write_text("x y\nq r s\n")
    counts = peer.decode_token_counts(Pieces(), str(sources), str(ours), str(theirs))
    assert counts == {"source_tokens": 7, "ours_output_tokens": 7, "peer_output_tokens": 7}
    from tf_outheads_zoo.config import RunConfig

    lstm = RunConfig().with_overrides({
        "model.model_type": "lstm", "model.embedding_dim": 4, "model.hidden_dim": 6,
        "model.num_layers": 1, "model.bidirectional_encoder": True,
        "model.input_feeding": True}).model
    entry = {"ours": {"train_tokens_per_second": 2e9}, "peer": {"train_tokens_per_second": 1e9},
             "decode": {"sentences": 2, "ours_seconds": 1.0, "peer_seconds": 2.0, **counts}}
    peer.add_flops(entry, lstm, 10, {"source": 3.5, "target": 3.5},
                   peaks={"ours": 100.0, "peer": 100.0})
    per_token = peer.train_flops_per_target_token(lstm, 10, {"source": 3.5, "target": 3.5})
    assert entry["gflops"]["ours"]["train"] == pytest.approx(2 * per_token)
    assert entry["gflops"]["peer"]["train_percent_of_peak"] == pytest.approx(per_token)
    assert entry["gflops"]["ours"]["decode"] == pytest.approx(
        2 * entry["gflops"]["peer"]["decode"])
    # Each side against its own library's peak.
    peer.add_flops(entry, lstm, 10, {"source": 3.5, "target": 3.5},
                   peaks={"ours": 400.0, "peer": 50.0})
    assert entry["gflops"]["ours"]["train_percent_of_peak"] == pytest.approx(per_token / 2)
    assert entry["gflops"]["peer"]["train_percent_of_peak"] == pytest.approx(per_token * 2)


def test_the_peers_matmul_peak_runs_in_its_own_python(peer, tmp_path):
    # A stand-in for the peer's python: it must receive the product's size and repeats.
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\n[ "$1" = "-c" ] && [ "$3" = "64" ] && [ "$4" = "2" ] '
                    '&& echo "$PEAK"\n')
    fake.chmod(0o755)
    assert peer.peer_matmul_peak_gflops(str(fake), {"PEAK": "123.5"}, size=64,
                                        repeats=2) == 123.5


def test_decode_speeds_alternate_the_sides_and_take_medians(peer, tmp_path, monkeypatch):
    calls, ours_times, peer_times = [], iter([30.0, 10.0, 20.0]), iter([5.0, 50.0, 40.0])

    def ours(run_dir, source_text, output):
        calls.append("ours")
        pathlib.Path(output).write_text("x y\n" * 4)
        return next(ours_times)

    def theirs(bin_dir, checkpoint, pieces, prefix, tokenizer):
        calls.append("peer")
        pathlib.Path(prefix + ".hyp.sp").write_text("x y z\n" * 4)
        return [], next(peer_times)

    class Pieces:
        def encode(self, lines):
            return [line.split() for line in lines]

    monkeypatch.setattr(peer, "our_translate", ours)
    monkeypatch.setattr(peer, "peer_translate", theirs)
    dev_pieces = tmp_path / "dev.sp"
    dev_pieces.write_text("a b\nc\n")
    data = {"splits": {"dev": type("Split", (), {"sources": ["a b", "c"]})()},
            "files": {"dev.src": str(dev_pieces)}, "tokenizer": Pieces()}
    args = type("Args", (), {"decode_copies": 2, "decode_repeats": 3,
                             "peer_python": str(tmp_path / "bin" / "python")})()
    (tmp_path / "ours").mkdir()
    (tmp_path / "peer").mkdir()
    result = peer.decode_speeds(args, data, str(tmp_path / "ours"), str(tmp_path / "peer"), 100,
                                log=lambda line: None)
    assert calls == ["ours", "peer"] * 3
    assert result["ours_seconds_each"] == [30.0, 10.0, 20.0]
    assert result["ours_seconds"] == 20.0 and result["peer_seconds"] == 40.0
    assert result["ours_sentences_per_second"] == pytest.approx(4 / 20.0)
    assert result["peer_sentences_per_second"] == pytest.approx(4 / 40.0)
    # Pieces + EOS: 2 copies of (2 + 1) + (1 + 1); the peer 4 lines of 3 + 1.
    assert result["source_tokens"] == 10 and result["peer_output_tokens"] == 16


def test_missing_peer_environment_is_named(tmp_path):
    missing = tmp_path / "nothing" / "python"
    result = subprocess.run([sys.executable, str(SCRIPT), "--peer-python", str(missing),
                             "--output", str(tmp_path / "x.json")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert f"--peer-python {missing}: no such file" in result.stderr
    assert "peer_setup" not in result.stdout


def test_ct2_sides_are_converted_once_alternated_and_compared_per_output_piece(
        peer, tmp_path, monkeypatch):
    calls, converted, exported = [], [], []
    seconds = {"ours": 10.0, "peer": 20.0, "ours_int8": 30.0, "ct2_float32": 8.0,
               "ct2_int8": 4.0, "ours_ct2_float32": 9.0, "ours_ct2_int8": 5.0}

    def ours(run_dir, source_text, output, quantize=None):
        side = "ours_int8" if quantize == "int8" else "ours"
        calls.append(side)
        pathlib.Path(output).write_text("x y\n" * 4)  # 4 lines of 2 pieces + EOS
        return seconds[side]

    def theirs(bin_dir, checkpoint, pieces, prefix, tokenizer):
        calls.append("peer")
        pathlib.Path(prefix + ".hyp.sp").write_text("x y z\n" * 4)
        return [], seconds["peer"]

    def convert(peer_python, checkpoint, output_dir, quantization, env):
        converted.append((checkpoint, quantization))
        return output_dir

    def ct2(peer_python, model_dir, pieces, output, compute_type, env):
        calls.append(f"ct2_{compute_type}")
        assert model_dir.endswith(f"ct2-{compute_type}")
        pathlib.Path(output).write_text("x y z w\n" * 4)  # 4 lines of 4 pieces + EOS
        return seconds[f"ct2_{compute_type}"]

    def export(run_dir, output_dir, quantization):
        exported.append((run_dir, quantization))
        return output_dir

    def ours_ct2(model_dir, source_text, output):
        kind = model_dir.rsplit("-", 1)[1]
        calls.append(f"ours_ct2_{kind}")
        # float32: our graph's output exactly; int8: one line differs (3 pieces + EOS).
        pathlib.Path(output).write_text("x y\n" * 3 + ("x y" if kind == "float32" else "x z w")
                                        + "\n")
        return seconds[f"ours_ct2_{kind}"]

    def steady(peer_python, models, source_pieces, env, log=print):
        assert set(models) == {"peer_int8", "ours_int8"}
        return {name: {"pieces_per_second": 100.0} for name in models}

    class Pieces:
        def encode(self, lines):
            return [line.split() for line in lines]

    peer_ct2 = sys.modules["peer_ct2"]
    for module, name, function in (
            (peer, "our_translate", ours), (peer, "peer_translate", theirs),
            (peer, "ct2_steady_state", steady), (peer_ct2, "ct2_convert", convert),
            (peer_ct2, "ct2_translate", ct2), (peer_ct2, "ours_ct2_export", export),
            (peer_ct2, "ours_ct2_translate", ours_ct2)):
        monkeypatch.setattr(module, name, function)
    dev_pieces = tmp_path / "dev.sp"
    dev_pieces.write_text("a b\nc\n")
    data = {"splits": {"dev": type("Split", (), {"sources": ["a b", "c"]})()},
            "files": {"dev.src": str(dev_pieces)}, "tokenizer": Pieces(),
            "references": {"dev": ["x y", "x y"]}}
    args = type("Args", (), {"decode_copies": 2, "decode_repeats": 2, "ct2": True,
                             "peer_python": str(tmp_path / "bin" / "python")})()
    for side in ("ours", "peer"):
        (tmp_path / side).mkdir()
    result = peer.decode_speeds(args, data, str(tmp_path / "ours"), str(tmp_path / "peer"), 200,
                                log=lambda line: None)
    checkpoint = str(tmp_path / "peer" / "model_step_200.pt")
    assert converted == [(checkpoint, "float32"), (checkpoint, "int8")]
    assert exported == [(str(tmp_path / "ours"), "float32"), (str(tmp_path / "ours"), "int8")]
    order = ["ours", "peer", "ours_int8", "ct2_float32", "ours_ct2_float32", "ct2_int8",
             "ours_ct2_int8"]
    assert calls == order + order[::-1]
    assert result["output_tokens"] == {"ours": 12, "ours_int8": 12, "ct2_float32": 20,
                                       "ct2_int8": 20, "ours_ct2_float32": 12,
                                       "ours_ct2_int8": 13}
    # Per output piece: ours int8 12 / 30 s against CTranslate2 int8 20 / 4 s.
    assert result["ct2_int8_ratio"] == pytest.approx((12 / 30.0) / (20 / 4.0))
    assert result["ct2_int8_ratio_float32"] == pytest.approx((12 / 10.0) / (20 / 4.0))
    # Issue 57: our int8 export against the peer's (13 / 5 s against 20 / 4 s) and against
    # our float32 graph (12 / 10 s).
    assert result["ours_ct2_int8_vs_peer_ct2_int8"] == pytest.approx((13 / 5.0) / (20 / 4.0))
    assert result["ours_ct2_int8_vs_ours"] == pytest.approx((13 / 5.0) / (12 / 10.0))
    # Parity on the first copy of dev (2 lines): the float32 export writes the graph's.
    assert result["ct2_parity"]["identical_lines"] == 1.0
    assert result["ct2_parity"]["bleu"]["float32"] == result["ct2_parity"]["bleu"]["graph"]
    assert result["ct2_steady_state"]["ours_int8"]["pieces_per_second"] == 100.0


def test_the_peer_trains_from_a_relative_work_dir(peer, tmp_path, monkeypatch):
    # onmt_train runs in the peer's run directory: the config it is given must be found
    # from there (a relative --work-dir broke the Transformer run of 2026-11-30).
    from types import SimpleNamespace

    from tf_outheads_zoo.presets import preset_config

    vocab = tmp_path / "vocab.joint"
    vocab.write_text("".join(f"p{i}\n" for i in range(3996)))
    data = {"vocab": str(vocab), "src_vocab": str(vocab), "tgt_vocab": str(vocab),
            "files": {"train.src": "a", "train.tgt": "b"}}
    seen = {}

    def fake_run(command, cwd=None, **kwargs):
        config = command[command.index("-config") + 1]
        seen["found"] = os.path.exists(os.path.join(cwd, config))
        raise subprocess.CalledProcessError(2, command)  # stop before the logs are read

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(peer.subprocess, "run", fake_run)
    args = SimpleNamespace(peer_python="venv/bin/python", eval_every=300)
    with pytest.raises(subprocess.CalledProcessError):
        peer.run_peer(args, preset_config("transformer-cpu"), data, 1, "work/peer/run", 300)
    assert seen == {"found": True}


def test_ct2_steady_state_runs_each_model_in_a_process_of_its_own(peer, tmp_path):
    # Two CTranslate2 translators in one process slow each other: each model is timed in
    # its own processes, the models in turns, the median over all their passes.
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "python"
    fake.write_text(f"""#!{sys.executable}
import json, sys
models = json.loads(sys.argv[7])  # python -c CODE source batch passes threads models
with open({str(calls)!r}, "a") as f:
    f.write(",".join(models) + " " + sys.argv[5] + "\\n")
seconds = {{"a": [1.0, 2.0], "b": [4.0, 4.0]}}
print("loading...")
print(json.dumps({{name: {{"pieces": 40, "seconds": seconds[name]}} for name in models}}))
""")
    fake.chmod(0o755)
    peer_ct2 = sys.modules["peer_ct2"]
    result = peer_ct2.ct2_steady_state(str(fake), {"a": "dir_a", "b": "dir_b"}, "dev.sp",
                                       dict(os.environ), repeats=3, passes=2,
                                       log=lambda line: None)
    assert calls.read_text().split("\n")[:-1] == ["a 2", "b 2", "b 2", "a 2", "a 2", "b 2"]
    assert result["a"]["seconds"] == [1.0, 2.0] * 3
    assert result["a"]["pieces_per_second"] == pytest.approx(40 / 1.5)
    assert result["b"]["pieces_per_second"] == pytest.approx(40 / 4.0)

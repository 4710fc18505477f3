"""tf_outheads against OpenNMT-py 3.5.1 on the same data, pieces, model shape and steps.

Trains a zoo preset (`tf-outheads train`) and OpenNMT-py's model of the same shape, one
after the other, on the same cleaned splits cut into the same SentencePiece pieces, for
the same steps; then prints, for each: greedy dev BLEU every `--eval-every` steps
(sacrebleu against the stripped references the zoo trains on), training target tokens/s
(the median over windows of `train_speed.report_every` steps after step 50, the same
windows on both sides: `train_speed.py`) and greedy decoding sentences/s (whole process,
`--decode-copies` copies of the dev set, the median of `--decode-repeats` runs per side,
alternated), our/peer ratios (above 1: we are faster), and the GFLOP/s of both (matrix
products counted from the shapes, `forward_flops`) against each side's float32 matmul
speed on this machine (`matmul_peak_gflops`, `peer_matmul_peak_gflops`: TensorFlow's and
PyTorch's can differ by 2×). Writes JSON with `train_ratio` and `decode_ratio` for each
seed and their medians.

OpenNMT-py runs in its own virtual environment (`--peer-python`; how to make one:
benchmarks/docs/peer_opennmt.md). Not part of CI. Runs resume: each side of each seed
lives in its own directory under `--work-dir`, and a side that finished (its
`result.json` exists) is not run again, so a study interrupted by the end of a session
loses at most the run in progress (ours resumes from its backups).

The peer's model (`peer_config`): for an LSTM preset it follows
`shared/peers/opennmt-py-lstm-cpu.yaml`:
brnn encoder (hidden // 2 per direction), an input-feeding LSTM decoder, global
"general" attention, dropout on embeddings / between layers / on the attentional
state, Adam (β2 0.999, ε 1e-8), global gradient-norm clipping, label smoothing,
token batches normalised by target tokens, uniform(±0.1) initialisation (its
`param_init`), `share_decoder_embeddings` for a tied head, the preset's constant rate or
"noam" warm-up. For a pre-norm Transformer preset (`transformer-cpu`): OpenNMT-py's
Transformer of the same sizes, dropouts, Adam β2 and "noam" schedule. Only the heads
OpenNMT-py has (`softmax`, `tied`) can be compared.
"""

import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO_ROOT, benchmark_parser  # noqa: E402
from peer_ct2 import ct2_parity, ct2_result, ct2_sides, ct2_steady_state  # noqa: E402
from train_speed import (  # noqa: E402
    WARMUP, our_loss_reports, parse_peer_log, peer_window_speeds, read_curve, report_every,
    window_speeds,
)
from flops import (  # noqa: E402, F401  (the FLOP counts: flops.py, here too as before)
    add_flops, decode_flops, forward_flops, matmul_peak_gflops, peer_matmul_peak_gflops,
    train_flops_per_target_token,
)

QUICK = {"steps": 100, "eval_every": 100, "decode_copies": 2, "decode_repeats": 1}
PEER_SPECIALS = 4  # OpenNMT-py adds <unk> <blank> <s> </s> to a vocabulary file


# -- data ------------------------------------------------------------------------------
def prepare_data(preset_name, overrides, runs_dir, work_dir, log=print):
    """Splits as `tf_outheads_zoo.splits.load_splits` reads them, the study's shared tokenizer
    (`tf_outheads_zoo.study.tokenizer_dir`: our runs copy it), and the piece files OpenNMT-py
    reads (`train.src.sp`, ...), built once per tokenizer.

    A preset with separate vocabularies (`data.joint_vocabulary: false`) gets a
    vocabulary file per side, the pieces of its own SentencePiece model.

    Returns `{"splits", "tokenizer_dir", "vocab", "src_vocab", "tgt_vocab", "files",
    "tokenizer"}`: `vocab` is the target side's (the joint one's) file, `tokenizer` the
    target side's SentencePiece processor (it detokenizes the peer's output).
    """
    from tf_outheads_zoo.presets import preset_config
    from tf_outheads_zoo.study import tokenizer_dir
    from tf_outheads_zoo.splits import load_splits

    data_config = preset_config(preset_name, overrides).data
    joint = data_config.joint_vocabulary
    splits = load_splits(data_config, log=log)
    shared = tokenizer_dir(runs_dir, preset_name, overrides, log=log)
    from tf_outheads import data as tfo_data

    source_tokenizer, target_tokenizer = tfo_data.load_tokenizers(shared)
    data_dir = os.path.join(work_dir, "data", os.path.basename(shared))
    os.makedirs(data_dir, exist_ok=True)
    files = {}
    # Pairs the zoo drops for length (data.max_sequence_length) are dropped here too.
    limit = data_config.max_sequence_length
    for split in ("train", "dev", "test"):
        corpus = splits[split]
        src = source_tokenizer.pieces(corpus.sources)
        tgt = target_tokenizer.pieces(corpus.targets)
        if split == "train":
            keep = [len(s) + 1 <= limit and len(t) + 1 <= limit for s, t in zip(src, tgt)]
            src = [s for s, k in zip(src, keep) if k]
            tgt = [t for t, k in zip(tgt, keep) if k]
        for side, pieces in (("src", src), ("tgt", tgt)):
            path = os.path.join(data_dir, f"{split}.{side}.sp")
            files[f"{split}.{side}"] = path
            if not os.path.exists(path):
                with open(path + ".tmp", "w", encoding="utf-8") as f:
                    f.write("".join(" ".join(p) + "\n" for p in pieces))
                os.replace(path + ".tmp", path)
    specials = {"<pad>", "<unk>", "<s>", "</s>"}
    vocabularies = {}
    for side, tokenizer in (("src", source_tokenizer), ("tgt", target_tokenizer)):
        vocab = os.path.join(data_dir, "vocab.joint" if joint else f"vocab.{side}")
        vocabularies[side] = vocab
        with open(vocab, "w", encoding="utf-8") as f:
            for piece in tokenizer.vocabulary():
                if piece not in specials:
                    f.write(piece + "\n")
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(
        model_file=os.path.join(shared, "spm_joint.model" if joint else "spm_target.model"))
    return {"splits": splits, "tokenizer_dir": shared, "vocab": vocabularies["tgt"],
            "src_vocab": vocabularies["src"], "tgt_vocab": vocabularies["tgt"],
            "files": files, "tokenizer": processor}


# -- the peer ---------------------------------------------------------------------------
def peer_config(config, data, run_dir, steps, eval_every, seed):
    """OpenNMT-py options for the zoo preset's shape and recipe (a dict written as YAML)
    from its `RunConfig` (`preset_config`): the attentional LSTM (`peer_model_lstm`) or the
    pre-norm Transformer (`peer_model_transformer`), with its optimiser, batches and steps."""
    model, train, data_config = config.model, config.train, config.data
    head = model.head if isinstance(model.head, str) else model.head.get("class_name")
    if head not in ("softmax", "tied"):
        raise SystemExit("peer_opennmt: OpenNMT-py has an untied (softmax) or tied head only. "
                         f"Received: head={model.head!r}")
    builders = {"lstm": peer_model_lstm, "transformer": peer_model_transformer}
    if model.model_type not in builders:
        raise SystemExit(f"peer_opennmt: no peer for model_type={model.model_type!r}")
    clip = train.global_clipnorm or train.clipnorm or 0
    return {
        "src_vocab": data["src_vocab"], "tgt_vocab": data["tgt_vocab"],
        "src_vocab_size": peer_vocab_size(data["src_vocab"]),
        "tgt_vocab_size": peer_vocab_size(data["tgt_vocab"]),
        "src_words_min_frequency": 0, "tgt_words_min_frequency": 0,
        "vocab_size_multiple": 1,
        "data": {"corpus_1": {"path_src": data["files"]["train.src"],
                              "path_tgt": data["files"]["train.tgt"]}},
        "model_type": "text",
        **builders[model.model_type](model, train),
        "max_grad_norm": clip, "label_smoothing": train.label_smoothing,
        "batch_type": "tokens", "batch_size": data_config.batch_tokens,
        "normalization": "tokens", "accum_count": [1],
        "train_steps": steps, "valid_steps": 10 ** 6,
        "save_checkpoint_steps": eval_every, "keep_checkpoint": -1,
        "report_every": report_every(steps), "seed": seed,
        "num_workers": 0, "world_size": 1,
        "share_decoder_embeddings": "true" if head == "tied" else "false",
        "save_model": os.path.join(run_dir, "model"),
    }


def peer_vocab_size(vocab_path):
    """Words of the peer's vocabulary: the pieces of `vocab_path` (one a line) and the
    specials OpenNMT-py adds."""
    with open(vocab_path, encoding="utf-8") as f:
        return len(f.read().split("\n")) - 1 + PEER_SPECIALS


def peer_model_lstm(model, train):
    """brnn, input-feeding LSTM decoder, "general" attention (unscaled: OpenNMT-py has no
    `scaled_attention`), U(±0.1), Adam constant or the inverse-sqrt warm-up as "noam";
    `model` an `LSTMConfig`, `train` a `TrainConfig`."""
    if model.attention_score != "general" or not model.input_feeding:
        raise SystemExit("peer_opennmt: the peer set-up has 'general' attention with input "
                         "feeding")
    schedule = train.learning_rate_schedule or {}
    if schedule and (schedule.get("name") != "inverse_sqrt"
                     or schedule.get("model_dim", model.hidden_dim) != model.hidden_dim):
        raise SystemExit("peer_opennmt: the LSTM peer set-up has a constant rate or the "
                         f"inverse-sqrt (noam) schedule of the hidden size; received "
                         f"{schedule!r}")
    rate = ({"learning_rate": schedule.get("scale", 1.0), "decay_method": "noam",
             "warmup_steps": schedule["warmup_steps"]} if schedule else {"learning_rate":
            train.learning_rate, "decay_method": "none", "start_decay_steps": 1000000})
    return {
        "encoder_type": "brnn" if model.bidirectional_encoder else "rnn",
        "decoder_type": "rnn", "rnn_type": "LSTM",
        "enc_layers": model.encoder_layers or model.num_layers,
        "dec_layers": model.decoder_layers or model.num_layers,
        "hidden_size": model.hidden_dim, "word_vec_size": model.embedding_dim,
        "global_attention": "general", "input_feed": 1, "bridge": "false",
        "dropout": [model.dropout],
        "param_init": 0.1, "optim": "adam", **rate, "adam_beta1": 0.9,
        "adam_beta2": train.adam_beta_2 or 0.999,
    }


def peer_model_transformer(model, train):
    """OpenNMT-py's Transformer (pre-norm, with a final layer norm; sinusoidal positions;
    √d-scaled embeddings; Glorot-uniform initialisation), with the preset's sizes and its
    inverse-square-root schedule as OpenNMT-py's "noam" (the same formula:
    scale · d^-0.5 · min(n^-0.5, n · warmup^-1.5)). OpenNMT-py 3.5.1 has no post-norm
    Transformer, so the paper's `transformer-base` (post-norm) has no peer here."""
    if model.norm != "pre":
        raise SystemExit("peer_opennmt: OpenNMT-py 3.5.1's Transformer is pre-norm; "
                         f"received norm={model.norm!r}")
    schedule = train.learning_rate_schedule or {}
    if schedule.get("name") != "inverse_sqrt":
        raise SystemExit("peer_opennmt: the Transformer peer set-up has the inverse-sqrt "
                         f"(noam) schedule; received {schedule!r}")
    return {
        "encoder_type": "transformer", "decoder_type": "transformer",
        "position_encoding": "true", "layer_norm": "standard",
        "enc_layers": model.encoder_layers, "dec_layers": model.decoder_layers,
        "heads": model.num_heads, "hidden_size": model.model_dim,
        "word_vec_size": model.model_dim, "transformer_ff": model.ffn_dim,
        "dropout": [model.dropout], "attention_dropout": [model.attention_dropout],
        "param_init": 0, "param_init_glorot": "true",
        "optim": "adam", "learning_rate": schedule.get("scale", 1.0), "decay_method": "noam",
        "warmup_steps": schedule["warmup_steps"], "adam_beta1": 0.9,
        "adam_beta2": train.adam_beta_2 or 0.999,
    }


def _yaml(value, indent=0):
    pad = "  " * indent
    lines = []
    for key, item in value.items():
        if isinstance(item, dict):
            lines.append(f"{pad}{key}:")
            lines.append(_yaml(item, indent + 1))
        elif isinstance(item, list):
            lines.append(f"{pad}{key}: [{', '.join(json.dumps(x) for x in item)}]")
        elif isinstance(item, str) and item not in ("true", "false"):
            lines.append(f"{pad}{key}: {json.dumps(item)}")
        else:
            lines.append(f"{pad}{key}: {item}")
    return "\n".join(lines)


def peer_env():
    env = dict(os.environ)
    env.setdefault("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    env.setdefault("OMP_NUM_THREADS", str(os.cpu_count()))
    return env


def run_peer(args, config, data, seed, run_dir, steps, log=print):
    """Train the peer, decode each checkpoint on dev; returns the peer's result dict."""
    # Absolute: onmt_train runs in `run_dir`, where a relative --work-dir points nowhere.
    bin_dir = os.path.dirname(os.path.abspath(args.peer_python))
    run_dir = os.path.abspath(run_dir)
    os.makedirs(run_dir, exist_ok=True)
    config_path = os.path.join(run_dir, "config.yaml")
    with open(config_path, "w", encoding="utf-8") as f:
        f.write(_yaml(peer_config(config, data, run_dir, steps, args.eval_every, seed)) + "\n")
    log_path = os.path.join(run_dir, "train.log")
    final = os.path.join(run_dir, f"model_step_{steps}.pt")
    if not os.path.exists(final):
        log(f"[peer] onmt_train seed {seed}, {steps} steps → {log_path}")
        with open(log_path, "w", encoding="utf-8") as out:
            subprocess.run([os.path.join(bin_dir, "onmt_train"), "-config", config_path],
                           stdout=out, stderr=subprocess.STDOUT, env=peer_env(), check=True,
                           cwd=run_dir)
    reports = parse_peer_log(open(log_path, encoding="utf-8").read())
    dev_refs = data["references"]["dev"]
    bleu_history = []
    for step in range(args.eval_every, steps + 1, args.eval_every):
        hyp, _ = peer_translate(bin_dir, os.path.join(run_dir, f"model_step_{step}.pt"),
                                data["files"]["dev.src"], os.path.join(run_dir, f"dev.{step}"),
                                data["tokenizer"])
        bleu_history.append([step, corpus_bleu(hyp, dev_refs)])
        log(f"[peer] seed {seed} step {step}: dev BLEU {bleu_history[-1][1]:.2f}")
    windows = peer_window_speeds(reports)
    return {"dev_bleu_history": bleu_history, "train_tokens_per_second":
            statistics.median(windows), "train_window_speeds": windows,
            "loss_reports": reports}


def peer_translate(bin_dir, checkpoint, source_pieces, output_prefix, tokenizer,
                   batch_size=64):
    """Greedy decoding with onmt_translate (top-1 sampling = argmax: with beam 1 and no
    `-random_sampling_topk`, OpenNMT-py 3.5.1 samples at temperature 1); returns the
    detokenized hypotheses and the process' wall seconds."""
    output = output_prefix + ".hyp.sp"
    start = time.perf_counter()
    subprocess.run([os.path.join(bin_dir, "onmt_translate"), "-model", checkpoint,
                    "-src", source_pieces, "-output", output, "-beam_size", "1",
                    "-random_sampling_topk", "1", "-batch_size", str(batch_size),
                    "-batch_type", "sents", "-gpu", "-1"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=peer_env(),
                   check=True)
    seconds = time.perf_counter() - start
    with open(output, encoding="utf-8") as f:
        hypotheses = [tokenizer_decode(tokenizer, line) for line in f.read().split("\n")[:-1]]
    return hypotheses, seconds


def tokenizer_decode(processor, line):
    """The peer's output line (pieces separated by spaces) → text."""
    return processor.decode_pieces(line.split())


def corpus_bleu(hypotheses, references):
    """sacrebleu's BLEU as the zoo reports it (`tf_outheads.metrics.corpus_bleu`)."""
    from tf_outheads.metrics import corpus_bleu as score

    return score(hypotheses, references).score


# -- ours -------------------------------------------------------------------------------
def run_ours(args, seed, steps, log=print):
    """Our side: `tf_outheads_zoo.study.train_arm` (`tf-outheads train` on the shared pieces,
    as `tf-outheads study` trains an arm, in `--runs-dir/<--arm>/s<seed>`); returns
    `(run_dir, result dict)`."""
    from tf_outheads_zoo.commands import parse_overrides
    from tf_outheads_zoo.study import Arm, Study, train_arm

    arm_name = args.arm or args.preset
    arm = Arm(args.preset, tuple(parse_overrides(args.set).items()))
    study = Study(title="peer", paper="", arms={arm_name: arm}, baseline=arm_name, steps=steps,
                  eval_every=args.eval_every)
    run_dir = train_arm(args.runs_dir, study, arm_name, seed, log=log)
    history = []
    with open(os.path.join(run_dir, "bleu.jsonl"), encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            history.append([record["step"], record["bleu"]])
    for step, bleu in history:
        log(f"[ours] seed {seed} step {step}: dev BLEU {bleu:.2f}")
    curves = os.path.join(run_dir, "loss_curves.csv")
    windows = window_speeds(read_curve(curves), WARMUP, report_every(steps))
    return run_dir, {
        "run_dir": run_dir, "dev_bleu_history": history,
        "train_tokens_per_second": statistics.median(windows), "train_window_speeds": windows,
        "loss_reports": our_loss_reports(curves, report_every(steps))}


def our_translate(run_dir, source_text, output, batch_size=64, quantize=None):
    start = time.perf_counter()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run([sys.executable, "-m", "tf_outheads_zoo.cli", "translate", "--run-dir", run_dir,
                    "--input", source_text, "--output", output, "--batch-size",
                    str(batch_size), "--beam-size", "1",
                    *(["--quantize", quantize] if quantize else [])],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True,
                   cwd=REPO_ROOT)
    return time.perf_counter() - start


# -- pieces -----------------------------------------------------------------------------
def piece_counts(path):
    """Pieces + EOS of every line of a piece file."""
    with open(path, encoding="utf-8") as f:
        return [len(line.split()) + 1 for line in f]


def piece_lengths(path):
    """Mean pieces + EOS per line of a piece file."""
    counts = piece_counts(path)
    return statistics.fmean(counts) if counts else 0.0


# -- the comparison ---------------------------------------------------------------------
def decode_speeds(args, data, ours_dir, peer_dir, steps, log=print):
    """Whole-process greedy decoding of `--decode-copies` copies of dev, both sides."""
    copies = args.decode_copies
    sources = data["splits"]["dev"].sources * copies
    text = os.path.join(ours_dir, "decode_input.txt")
    with open(text, "w", encoding="utf-8") as f:
        f.write("\n".join(sources) + "\n")
    pieces = os.path.join(peer_dir, "decode_input.sp")
    with open(data["files"]["dev.src"], encoding="utf-8") as f:
        dev_pieces = f.read()
    with open(pieces, "w", encoding="utf-8") as f:
        f.write(dev_pieces * copies)
    checkpoint = os.path.join(peer_dir, f"model_step_{steps}.pt")
    sides = {
        "ours": lambda: our_translate(ours_dir, text, os.path.join(ours_dir, "decode_output.txt")),
        "peer": lambda: peer_translate(os.path.dirname(args.peer_python), checkpoint, pieces,
                                       os.path.join(peer_dir, "decode"), data["tokenizer"])[1],
    }
    ct2 = getattr(args, "ct2", False)
    if ct2:  # issues 42 and 57: CTranslate2 from the peer's checkpoint and from our run
        ct2_calls, ct2_outputs = ct2_sides(args.peer_python, checkpoint, ours_dir, peer_dir,
                                           text, pieces, peer_env(), our_translate)
        sides.update(ct2_calls)
    # Alternated (ours, peer, ours, peer, ...; with CTranslate2's sides every other
    # round in reverse order) so that a slow spell of the machine falls on every side;
    # each side's median process time is its speed.
    times = {side: [] for side in sides}
    for repeat in range(args.decode_repeats):
        order = list(sides)
        if ct2 and repeat % 2:
            order.reverse()
        for side in order:
            times[side].append(sides[side]())
    medians = {side: statistics.median(values) for side, values in times.items()}
    ours, peer = medians["ours"], medians["peer"]
    log(f"[decode] {len(sources)} sentences, median of {args.decode_repeats}: " + ", ".join(
        f"{side} {medians[side]:.1f} s ({', '.join(f'{t:.1f}' for t in times[side])})"
        for side in sides))
    result = {"sentences": len(sources), "ours_seconds": ours, "peer_seconds": peer,
              "ours_seconds_each": times["ours"], "peer_seconds_each": times["peer"],
              "ours_sentences_per_second": len(sources) / ours,
              "peer_sentences_per_second": len(sources) / peer,
              **decode_token_counts(data["tokenizer"], pieces,
                                    os.path.join(ours_dir, "decode_output.txt"),
                                    os.path.join(peer_dir, "decode.hyp.sp"))}
    if ct2:
        counts = {side: (sum(piece_counts(path)) if path.endswith(".sp")
                         else ours_output_tokens(data["tokenizer"], path))
                  for side, path in ct2_outputs.items()}
        result.update(ct2_result(medians, times, {"ours": result["ours_output_tokens"],
                                                  **counts}, log))
        result["ct2_parity"] = ct2_parity(
            os.path.join(ours_dir, "decode_output.txt"), ct2_outputs,
            data["references"]["dev"], log)
        result["ct2_steady_state"] = ct2_steady_state(
            args.peer_python, {"peer_int8": os.path.join(peer_dir, "ct2-int8"),
                               "ours_int8": os.path.join(ours_dir, "ct2-int8")},
            data["files"]["dev.src"], peer_env(), log=log)
    return result


def ours_output_tokens(processor, ours_output):
    """Pieces + EOS of our detokenized output file, re-cut into the shared pieces."""
    with open(ours_output, encoding="utf-8") as f:
        return sum(len(piece_ids) + 1 for piece_ids in processor.encode(f.read().split("\n")[:-1]))


def decode_token_counts(processor, source_pieces, ours_output, peer_output):
    """Source tokens and each side's output tokens (pieces + EOS) of the decoding run:
    ours re-cut into the shared pieces, the peer's as it wrote them."""
    return {"source_tokens": sum(piece_counts(source_pieces)),
            "ours_output_tokens": ours_output_tokens(processor, ours_output),
            "peer_output_tokens": sum(piece_counts(peer_output))}


def print_table(preset, results, eval_every, steps):
    print(f"\nGreedy dev BLEU, {preset} (ours) vs OpenNMT-py 3.5.1 (peer), same pieces/steps")
    columns = list(range(eval_every, steps + 1, eval_every))
    print("| system | seed | " + " | ".join(f"@{c}" for c in columns)
          + " | train tok/s | decode sent/s | train GFLOP/s (% peak) | decode GFLOP/s (% peak) |")
    print("|---|---|" + "---|" * len(columns) + "---|---|---|---|")
    for seed, entry in results.items():
        for side in ("ours", "peer"):
            history = dict(map(tuple, entry[side]["dev_bleu_history"]))
            cells = [f"{history[c]:.2f}" if c in history else "" for c in columns]
            speed = entry[side]["train_tokens_per_second"]
            decode = entry["decode"][f"{side}_sentences_per_second"]
            g = entry["gflops"][side]
            print(f"| {side} | {seed} | " + " | ".join(cells) + f" | {speed:,.0f} | {decode:.1f} | "
                  f"{g['train']:.0f} ({g['train_percent_of_peak']:.0f} %) | "
                  f"{g['decode']:.0f} ({g['decode_percent_of_peak']:.0f} %) |")
    for seed, entry in results.items():
        print(f"seed {seed}: train_ratio {entry['train_ratio']:.3f}, "
              f"decode_ratio {entry['decode_ratio']:.3f} (ours / peer; > 1: we are faster)")
        for side in ("ours", "peer"):
            windows = entry[side]["train_window_speeds"]
            print(f"  {side} training tok/s, {len(windows)} windows: median "
                  f"{statistics.median(windows):,.0f}, range {min(windows):,.0f}-"
                  f"{max(windows):,.0f}")


def main(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    parser.add_argument("--preset", default="lstm-cpu-tied",
                        help="zoo preset: an LSTM or a pre-norm Transformer with a softmax or tied head")
    parser.add_argument("--seeds", default="1234", help="comma-separated seeds")
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--eval-every", type=int, default=300,
                        help="dev BLEU every this many steps (both sides)")
    parser.add_argument("--decode-copies", type=int, default=8,
                        help="copies of the dev set (1,068 verses) decoded to time decoding")
    parser.add_argument("--decode-repeats", type=int, default=3,
                        help="whole-process decodes per side, alternated; the median is reported")
    parser.add_argument("--peer-python", default=os.environ.get(
        "TF_OUTHEADS_PEER_PYTHON", str(REPO_ROOT / "runs" / "peer-venv" / "bin" / "python")),
        help="python of the OpenNMT-py virtual environment (env TF_OUTHEADS_PEER_PYTHON)")
    parser.add_argument("--work-dir", default=str(REPO_ROOT / "runs" / "peer_opennmt"),
                        help="the peer's runs and piece files")
    parser.add_argument("--runs-dir", default=str(REPO_ROOT / "runs" / "study" / "pappas"),
                        help="our runs (<arm>/s<seed>) and the shared tokenizers, as "
                             "tf-outheads study keeps them (default: the Pappas study's)")
    parser.add_argument("--arm", help="our runs' arm name in --runs-dir (default: tied for "
                                      "lstm-cpu-tied without --set, the Pappas study's arm; "
                                      "else the preset's name)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override for our preset (tf-outheads train --set)")
    parser.add_argument("--ct2", action="store_true",
                        help="also time CTranslate2 (float32 and int8, converted from the "
                             "peer's checkpoint) and ours in int8 (issue 42's ct2_int8_ratio)")
    parser.add_argument("--only", choices=("ours", "peer"), default=None,
                        help="run one side (the other must have finished, or is skipped)")
    parser.add_argument("--output", default=str(REPO_ROOT / "benchmarks" / "results"
                                                / "peer_opennmt.json"))
    args = parser.parse_args(argv)
    if args.arm is None:
        args.arm = "tied" if args.preset == "lstm-cpu-tied" and not args.set else args.preset
    if args.quick:
        args.steps, args.eval_every, args.decode_copies, args.decode_repeats = (
            QUICK["steps"], QUICK["eval_every"], QUICK["decode_copies"], QUICK["decode_repeats"])
    if args.steps % args.eval_every:
        parser.error(f"--steps must be a multiple of --eval-every. Received: "
                     f"--steps {args.steps}, --eval-every {args.eval_every}")
    if args.decode_repeats < 1:
        parser.error(f"--decode-repeats must be at least 1. Received: {args.decode_repeats}")
    if not os.path.exists(args.peer_python):
        parser.error(f"--peer-python {args.peer_python}: no such file; make the OpenNMT-py "
                     "environment first (benchmarks/docs/peer_opennmt.md)")
    started = time.perf_counter()
    sys.path.insert(0, str(REPO_ROOT))
    from common import machine_info, setup, write_record

    setup(None)
    from tf_outheads_zoo.commands import parse_overrides
    from tf_outheads_zoo.presets import preset_config

    overrides = parse_overrides(args.set)
    config = preset_config(args.preset, overrides)
    machine = machine_info()
    data = prepare_data(args.preset, overrides, args.runs_dir, args.work_dir)
    data["references"] = {"dev": data["splits"]["dev"].targets}
    peak = {"ours": matmul_peak_gflops(),
            "peer": peer_matmul_peak_gflops(args.peer_python, peer_env())}
    train_lengths = {"source": piece_lengths(data["files"]["train.src"]),
                     "target": piece_lengths(data["files"]["train.tgt"])}
    vocab_size = peer_vocab_size(data["vocab"])
    print(f"[flops] float32 matmul peak: ours (TensorFlow) {peak['ours']:.0f}, the peer "
          f"(PyTorch) {peak['peer']:.0f} GFLOP/s; training pairs' mean pieces + EOS: "
          f"source {train_lengths['source']:.1f}, target {train_lengths['target']:.1f}")
    results = {}
    for seed in (int(s) for s in args.seeds.split(",")):
        peer_dir = os.path.join(args.work_dir, "peer", os.path.basename(data["tokenizer_dir"]),
                                f"{args.preset}-s{seed}-{args.steps}")
        entry, ours_dir = {}, None
        if args.only in (None, "ours"):
            ours_dir, entry["ours"] = run_ours(args, seed, args.steps)
        if args.only in (None, "peer"):
            entry["peer"] = run_peer(args, config, data, seed, peer_dir, args.steps)
        if args.only is None:
            entry["decode"] = decode_speeds(args, data, ours_dir, peer_dir, args.steps)
            entry["train_ratio"] = (entry["ours"]["train_tokens_per_second"]
                                    / entry["peer"]["train_tokens_per_second"])
            entry["decode_ratio"] = (entry["decode"]["ours_sentences_per_second"]
                                     / entry["decode"]["peer_sentences_per_second"])
            if args.ct2:
                entry["ct2_int8_ratio"] = entry["decode"]["ct2_int8_ratio"]
            add_flops(entry, config.model, vocab_size, train_lengths, peak)
        results[seed] = entry
    fields = {"preset": args.preset, "results": results, "matmul_peak_gflops": peak["ours"],
              "peer_matmul_peak_gflops": peak["peer"],
              "train_lengths": train_lengths}
    if args.only is None:
        print_table(args.preset, results, args.eval_every, args.steps)
        fields["train_ratio"] = statistics.median(e["train_ratio"] for e in results.values())
        fields["decode_ratio"] = statistics.median(e["decode_ratio"] for e in results.values())
        if args.ct2:
            fields["ct2_int8_ratio"] = statistics.median(
                e["ct2_int8_ratio"] for e in results.values())
        fields["dev_bleu_median"] = {
            side: {str(step): statistics.median(
                dict(map(tuple, e[side]["dev_bleu_history"])).get(step, float("nan"))
                for e in results.values())
                for step in range(args.eval_every, args.steps + 1, args.eval_every)}
            for side in ("ours", "peer")}
    write_record("peer_opennmt", args, machine, started, fields)


if __name__ == "__main__":
    main()

"""Streamed text-file corpora at WMT scale: memory, start-up, backup size, pipeline speed.

Builds corpora of 0.5M and 5M pairs from the embedded Bible corpus's training
split (its 27,952 verses repeated, each repetition in a new seeded order), as
plain-text `train.es` / `train.en` files, and trains the `lstm-cpu` preset's
data path on them the way `tf-outheads train` does (`tf_outheads_zoo.splits.TrainingData`:
the streaming scan, SentencePiece on a sample of `data.tokenizer_sample` pairs,
`tf_outheads.data.make_text_dataset`). Each size runs in its own process, so
its peak RSS is its own. Per size:

- peak RSS of the process (`ru_maxrss`), start to end (scan, SentencePiece,
  pipeline, model steps and backups);
- seconds of the scan, of SentencePiece, and from the tokenizer to the first
  training batch;
- input pipeline alone: target tokens/s (non-padding `target_out`) over
  `--pipeline-batches` batches after the first;
- the `lstm-cpu` model on the same stream (`tf_outheads.training.fit`, backups
  every `--backup-every` steps): target tokens/s over `--model-steps` steps
  after `--warmup-steps`, and the size of its last backup (weights, optimizer
  slots and the iterator: file offsets, the shuffle buffer, partial buckets).

The issue-21 targets: RSS(5M) <= 1.2 x RSS(0.5M) and < 4 GB; first batch < 60 s
after the tokenizer; backup size independent of the corpus; pipeline >= 5x the
model's rate. Not part of CI (the test runs `--quick`).

    python benchmarks/data_pipeline.py                      # 0.5M and 5M pairs
    python benchmarks/data_pipeline.py --quick               # 2K and 8K pairs, a smoke test
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

QUICK = {"sizes": "2000,8000", "pipeline_batches": 20, "model_steps": 3, "warmup_steps": 2,
         "backup_every": 2, "tokenizer_sample": 1000, "vocab_size": 500,
         "shuffle_buffer": 1000}


def parse(argv):
    parser = common.benchmark_parser(__doc__, QUICK)
    parser.add_argument("--sizes", default="500000,5000000", help="corpus sizes in pairs")
    parser.add_argument("--preset", default="lstm-cpu")
    parser.add_argument("--work-dir", default=None,
                        help="where the corpora and runs go (default: a new temporary directory)")
    parser.add_argument("--pipeline-batches", type=int, default=400)
    parser.add_argument("--model-steps", type=int, default=40)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--backup-every", type=int, default=20)
    parser.add_argument("--tokenizer-sample", type=int, default=None,
                        help="data.tokenizer_sample (default: the preset's)")
    parser.add_argument("--vocab-size", type=int, default=None,
                        help="data.vocab_size (default: the preset's)")
    parser.add_argument("--shuffle-buffer", type=int, default=None,
                        help="data.shuffle_buffer (default: the preset's)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # one size, internal
    common.add_thread_arguments(parser)
    return common.parse_benchmark_args(parser, argv, "data_pipeline", QUICK,
                                       positive=("pipeline_batches", "model_steps"))


def write_corpus(directory, size, seed=0):
    """`size` pairs of the Bible's training split, repeated in new seeded orders."""
    from tf_outheads import data as tfo_data
    from tf_outheads_zoo.config import EMBEDDED_CORPUS

    os.makedirs(directory, exist_ok=True)
    source, target = os.path.join(directory, "train.es"), os.path.join(directory, "train.en")
    if os.path.exists(target):
        with open(target, "rb") as f:
            if sum(1 for _ in f) == size:
                return source, target
    corpus = tfo_data.read_tsv(EMBEDDED_CORPUS, split="train")
    rng = random.Random(seed)
    order = list(range(len(corpus)))
    written = 0
    with open(source, "w", encoding="utf-8") as s, open(target, "w", encoding="utf-8") as t:
        while written < size:
            rng.shuffle(order)
            chunk = order[:size - written]
            s.write("".join(corpus.sources[i] + "\n" for i in chunk))
            t.write("".join(corpus.targets[i] + "\n" for i in chunk))
            written += len(chunk)
    return source, target


def directory_bytes(path):
    return sum(os.path.getsize(os.path.join(root, name))
               for root, _, names in os.walk(path) for name in names)


def measure(args, size):
    """One size, in this process: the record of one row."""
    import keras
    import tensorflow as tf

    from tf_outheads import data as tfo_data
    from tf_outheads.training.trainer import fit
    from tf_outheads.training.translation import compile_for_translation
    from tf_outheads_zoo.presets import preset_config
    from tf_outheads_zoo.components import build_model, build_optimizer, training_loss
    from tf_outheads_zoo.splits import TrainingData, tokenizer_seed

    work = os.path.join(args.work_dir, f"pairs-{size}")
    source, target = write_corpus(os.path.join(work, "corpus"), size)
    overrides = {"data.train": {"source": source, "target": target}}
    for key in ("tokenizer_sample", "vocab_size", "shuffle_buffer"):
        if getattr(args, key) is not None:
            overrides[f"data.{key}"] = getattr(args, key)
    config = preset_config(args.preset, overrides)
    keras.utils.set_random_seed(config.train.seed)
    row = {"pairs": size, "corpus_bytes": os.path.getsize(source) + os.path.getsize(target)}
    start = time.perf_counter()
    lines = []
    data = TrainingData(config.data, seed=tokenizer_seed(config), log=lines.append)
    row["scan_seconds"] = round(time.perf_counter() - start, 1)
    row["kept_pairs"] = data.size
    row["tokenizer_sample"] = len(data.sample)
    start = time.perf_counter()
    tokenizers = tfo_data.build_tokenizers(
        data.sample.sources, data.sample.targets, os.path.join(work, "tokenizer"),
        vocab_size=config.data.vocab_size, joint=config.data.joint_vocabulary,
        model_type=config.data.tokenizer_type, seed=tokenizer_seed(config))
    row["tokenizer_seconds"] = round(time.perf_counter() - start, 1)
    del data.sample

    start = time.perf_counter()
    dataset = data.dataset(*tokenizers, seed=config.train.seed)
    iterator = iter(dataset)
    next(iterator)
    row["first_batch_seconds"] = round(time.perf_counter() - start, 2)
    tokens, padded = 0, 0
    start = time.perf_counter()
    for _ in range(args.pipeline_batches):
        _, target_out = next(iterator)
        tokens += int(tf.math.count_nonzero(target_out))
        padded += int(tf.size(target_out))
    row["pipeline_tokens_per_second"] = round(tokens / (time.perf_counter() - start))
    row["target_padding_share"] = round(1 - tokens / padded, 3)
    del iterator

    model = build_model(config, tokenizers[0].vocab_size, tokenizers[1].vocab_size)
    compile_for_translation(model, learning_rate=config.train.learning_rate,
                            clipnorm=config.train.clipnorm,
                            optimizer=build_optimizer(config),
                            **training_loss(config.train))
    times = []

    class Clock(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            self.start = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            times.append(time.perf_counter() - self.start)

    backup_dir = os.path.join(work, "backup")
    steps = args.warmup_steps + args.model_steps
    fit(model, dataset, epochs=1, steps_per_epoch=steps, callbacks=[Clock()],
        backup_dir=backup_dir, backup_every_n_steps=args.backup_every, keep_backups=1,
        verbose=0)
    # Tokens per step: the mean of the pipeline's batches above (the same stream's
    # distribution); step times exclude the backups, written after a step ends.
    step_seconds = times[args.warmup_steps:steps]
    row["model_tokens_per_second"] = round(tokens / args.pipeline_batches
                                           / (sum(step_seconds) / len(step_seconds)))
    row["pipeline_over_model"] = round(row["pipeline_tokens_per_second"]
                                       / row["model_tokens_per_second"], 1)
    backups = sorted(name for name in os.listdir(backup_dir) if name.startswith("ckpt-"))
    row["backup_bytes"] = directory_bytes(os.path.join(backup_dir, backups[-1]))
    row["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    row["log"] = lines
    return row


def main(argv=None):
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.work_dir is None:
        import tempfile

        args.work_dir = tempfile.mkdtemp(prefix="data-pipeline-")
    if args.child is not None:
        common.setup(args)
        print("ROW " + json.dumps(measure(args, int(args.child))), flush=True)
        return
    started = time.perf_counter()
    common.setup(args)
    machine = common.machine_info()
    rows = []
    argv = sys.argv[1:] if argv is None else argv
    for size in [int(s) for s in args.sizes.split(",")]:
        print(f"[data_pipeline] {size:,} pairs ...", flush=True)
        result = subprocess.run([sys.executable, os.path.abspath(__file__), *argv,
                                 "--work-dir", args.work_dir, "--child", str(size)],
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.stderr.write(result.stderr[-5000:])
            raise SystemExit(f"[data_pipeline] the {size}-pair run failed")
        row = json.loads(next(line[4:] for line in result.stdout.splitlines()
                              if line.startswith("ROW ")))
        rows.append(row)
    columns = ("pairs", "peak_rss_mb", "scan_seconds", "tokenizer_seconds",
               "first_batch_seconds", "backup_bytes", "pipeline_tokens_per_second",
               "model_tokens_per_second", "pipeline_over_model", "target_padding_share")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(f"{row[c]:,}" if isinstance(row[c], int) else str(row[c])
                                for c in columns) + " |")
    checks = {}
    if len(rows) >= 2:
        small, large = rows[0], rows[-1]
        checks = {
            "rss_ratio_largest_to_smallest": round(large["peak_rss_mb"] / small["peak_rss_mb"], 2),
            "largest_rss_under_4gb": large["peak_rss_mb"] < 4096,
            "first_batch_under_60s": all(r["first_batch_seconds"] < 60 for r in rows),
            "backup_ratio_largest_to_smallest": round(large["backup_bytes"]
                                                      / small["backup_bytes"], 3),
            "pipeline_at_least_5x_model": all(r["pipeline_over_model"] >= 5 for r in rows),
        }
        print("checks: " + ", ".join(f"{k} {v}" for k, v in checks.items()))
    common.write_record("data_pipeline", args, machine, started,
                        {"rows": rows, "checks": checks}, exclude=("child",))


if __name__ == "__main__":
    main()

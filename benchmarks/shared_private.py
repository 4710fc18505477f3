"""Training and decoding speed of shared-private embeddings against vanilla ones.

Liu et al. (2019, §2.2) assemble the source and target embedding matrices from
shared and private sub-matrices at every step and report that "both the
training speed and decoding speed are not influenced". The issue that asked
for this benchmark set the goal: shared-private at >= 0.98x the throughput of
vanilla embeddings, on the Transformer, in training and in decoding.

One run times `tf_outheads_zoo.transformer.TransformerSeq2Seq` for each variant of
`--variants`:

- `vanilla`: separate source and target tables and an untied softmax (the
  paper's "Vanilla", the reference);
- `decoder-wt`: separate tables, the output layer tied to the target table;
- `shared-private`: `SharedPrivateEmbedding` with the paper's category
  proportions (lm 70.6%, wf 0.04%, ur 29.4% of the vocabulary: Table 5's
  21,172 / 11 / 8,817 of 30K) and λ = (0.9, 0.7, 0.5), tied output;
- `three-way` (optional): every word paired with itself and λ = 1: one table.

Default sizes are the paper's: Transformer base (6+6 layers, 512/2048, 8
heads), |V_src| = |V_tgt| = 30K. Synthetic data of fixed shape (random ids, no
padding). Training: `train_on_batch` steps (label-smoothed cross-entropy, Adam)
after `--warmup-steps` untimed ones. Decoding: `greedy_search` and
`beam_search` of `--decode-batch` sentences for exactly `--decode-length`
steps (EOS is masked by `min_length`, so every variant runs the same steps),
each traced once before timing. Variants take turns and reverse order on every
repeat (`benchmarks/common.py`'s `interleaved`). Reported: median ms per
training step and per decoded batch, and throughput ratios against vanilla and
against decoder WT (ratio of the medians; the JSON also has the per-repeat
ratios and CPU seconds). `--quick` makes every size tiny (a smoke test).

Run from the repository root:

    python benchmarks/shared_private.py --quick     # < 1 min
    python benchmarks/shared_private.py             # the paper's sizes (minutes on 2 cores)

Results go to `--output` (JSON, default benchmarks/results/shared_private.json).
"""

import statistics
import sys
import time

from common import (  # benchmarks/ is the script's folder
    add_thread_arguments, add_variants_argument, benchmark_parser, interleaved, machine_info,
    parse_benchmark_args, parse_variants, per_unit, print_header, random_sentences, start, stats,
    training_batches, write_record,
)

VANILLA, DECODER_WT = "vanilla", "decoder-wt"
VARIANTS = (VANILLA, DECODER_WT, "shared-private", "three-way")
GOAL = 0.98  # shared-private throughput / vanilla throughput
PAPER_SHARES = (21_172 / 30_000, 11 / 30_000)  # lm and wf shares; ur is the rest

QUICK = {
    "model_dim": 32,
    "ffn_dim": 64,
    "num_heads": 4,
    "layers": 1,
    "vocab_size": 600,
    "batch_size": 4,
    "source_length": 8,
    "target_length": 8,
    "decode_batch": 2,
    "decode_length": 4,
    "beam_size": 2,
    "warmup_steps": 1,
    "steps": 1,
    "repeats": 1,
}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    add_variants_argument(parser, "vanilla,decoder-wt,shared-private", VARIANTS, VANILLA)
    model = parser.add_argument_group("model (defaults: Transformer base)")
    model.add_argument("--model-dim", type=int, default=512)
    model.add_argument("--ffn-dim", type=int, default=2048)
    model.add_argument("--num-heads", type=int, default=8)
    model.add_argument("--layers", type=int, default=6, help="encoder and decoder layers each")
    model.add_argument("--sharing-ratios", default="0.9,0.7,0.5", help="λ_lm,λ_wf,λ_ur")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    data.add_argument("--vocab-size", type=int, default=30000, help="source and target")
    data.add_argument("--batch-size", type=int, default=32, help="training sentences per batch")
    data.add_argument("--source-length", type=int, default=30)
    data.add_argument("--target-length", type=int, default=30)
    data.add_argument("--decode-batch", type=int, default=32, help="sentences per decoded batch")
    data.add_argument("--decode-length", type=int, default=30, help="decoding steps")
    data.add_argument("--beam-size", type=int, default=4)
    data.add_argument("--seed", type=int, default=0)
    timing = parser.add_argument_group("timing")
    timing.add_argument("--warmup-steps", type=int, default=2)
    timing.add_argument("--steps", type=int, default=3, help="training steps per repeat")
    timing.add_argument("--repeats", type=int, default=5)
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "shared_private", QUICK, positive=(
        "model_dim", "ffn_dim", "num_heads", "layers", "batch_size", "source_length",
        "target_length", "decode_batch", "decode_length", "beam_size", "steps", "repeats"))
    try:
        args.ratios = tuple(float(r) for r in args.sharing_ratios.split(","))
    except ValueError:
        parser.error(f"--sharing-ratios must be three floats. Received: {args.sharing_ratios}")
    if len(args.ratios) != 3:
        parser.error(f"--sharing-ratios must be three floats. Received: {args.sharing_ratios}")
    if args.vocab_size < 16:
        parser.error("--vocab-size must be >= 16")
    args.variant_list = parse_variants(parser, args.variants, VARIANTS, VANILLA)
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads.data.word_pair_table import WordPairs  # noqa: E402
from tf_outheads.decoding import beam_search, greedy_search  # noqa: E402
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy  # noqa: E402
from tf_outheads.metrics import parameter_report  # noqa: E402
from tf_outheads_zoo.transformer import TransformerSeq2Seq  # noqa: E402



def paper_pairs(vocab_size, seed):
    """Every id paired with a random other id, categories in Table 5's shares."""
    lm = round(PAPER_SHARES[0] * vocab_size)
    wf = max(1, round(PAPER_SHARES[1] * vocab_size))
    rng = np.random.default_rng(seed)
    ids = np.arange(vocab_size)
    return WordPairs(ids, rng.permutation(vocab_size),
                     np.repeat([0, 1, 2], [lm, wf, vocab_size - lm - wf]), vocab_size, vocab_size)


def build_model(args, variant):
    keras.utils.set_random_seed(args.seed)
    shared_private = None
    if variant == "shared-private":
        shared_private = {"pairs": paper_pairs(args.vocab_size, args.seed),
                          "sharing_ratios": args.ratios}
    elif variant == "three-way":
        shared_private = {"pairs": WordPairs.identity(args.vocab_size),
                          "sharing_ratios": (1.0, 1.0, 1.0)}
    model = TransformerSeq2Seq(
        args.vocab_size, args.vocab_size, model_dim=args.model_dim, ffn_dim=args.ffn_dim,
        num_heads=args.num_heads, encoder_layers=args.layers, decoder_layers=args.layers,
        head="softmax" if variant == VANILLA else "tied", shared_private=shared_private)
    model.compile(optimizer=keras.optimizers.Adam(1e-4, beta_2=0.98, epsilon=1e-9),
                  loss=MaskedSequenceCrossEntropy(label_smoothing=0.1))
    return model


def synthetic_batches(args):
    rng = np.random.default_rng(args.seed)
    batches = training_batches(args, rng, args.vocab_size, args.vocab_size)
    sources = tf.constant(random_sentences(rng, args.decode_batch, args.source_length,
                                           args.vocab_size))
    return batches, sources


def decoder(model, args, beam):
    """A traced function decoding a batch for exactly `decode_length` steps."""
    cache = model.head.inference_cache()
    step_fn = model.make_step_fn(cache)

    @tf.function
    def decode(source_ids):
        state = model.initial_decoding_state(source_ids, max_length=args.decode_length)
        if beam:
            result = beam_search(step_fn, state, args.decode_batch, args.beam_size,
                                 max_length=args.decode_length, min_length=args.decode_length)
        else:
            result = greedy_search(step_fn, state, args.decode_batch,
                                   max_length=args.decode_length, min_length=args.decode_length)
        return result.ids

    return decode


def ratios(timings, name, reference, key="seconds"):
    mine, base = per_unit(timings[name], key), per_unit(timings[reference], key)
    return {"throughput_ratio": statistics.median(base) / statistics.median(mine),
            "paired_throughput_ratio": statistics.median(b / m for b, m in zip(base, mine))}


def main(args):
    machine = machine_info()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {machine['cpu_count']} CPUs"
          + (" (--quick)" if args.quick else ""), flush=True)
    print(f"Transformer {args.layers}+{args.layers} layers, {args.model_dim}/{args.ffn_dim}, "
          f"{args.num_heads} heads, |V| {args.vocab_size:,}; λ = {args.ratios}", flush=True)
    started = time.perf_counter()
    batches, sources = synthetic_batches(args)
    models, parameters, decoders = {}, {}, {}
    for name in args.variant_list:
        models[name] = build_model(args, name)
        report = parameter_report(models[name])
        parameters[name] = {"total": report.total, "embeddings": report.groups["embeddings"],
                            "output_layer": report.groups["output_layer"]}
        decoders[name] = {"greedy": decoder(models[name], args, beam=False),
                          "beam": decoder(models[name], args, beam=True)}
        print(f"  built {name}: {report.total:,} parameters, embeddings "
              f"{parameters[name]['embeddings']:,}", flush=True)

    for name in args.variant_list:  # tracing, untimed
        start = time.perf_counter()
        for step in range(args.warmup_steps):
            models[name].train_on_batch(*batches[step % len(batches)])
        for function in decoders[name].values():
            function(sources)
        print(f"  warm-up {name}: {time.perf_counter() - start:.1f} s", flush=True)

    def train_once(name):
        for features, target_out in batches:
            models[name].train_on_batch(features, target_out)
        return len(batches), None

    def decode_once(kind):
        def run(name):
            ids = decoders[name][kind](sources)
            return 1, int(ids.shape[1])
        return run

    timings = {"training": interleaved(args.variant_list, train_once, args.repeats)}
    for kind in ("greedy", "beam"):
        timings[kind] = interleaved(args.variant_list, decode_once(kind), args.repeats)

    rows = []
    for name in args.variant_list:
        row = {"variant": name, "parameters": parameters[name]}
        for task, timing in timings.items():
            row[task] = {"ms": stats(per_unit(timing[name])), "vs_vanilla": ratios(timing, name, VANILLA),
                         "cpu_vs_vanilla": ratios(timing, name, VANILLA, "cpu_seconds"),
                         "timings": timing[name]}
            if DECODER_WT in timing:
                row[task]["vs_decoder_wt"] = ratios(timing, name, DECODER_WT)
        rows.append(row)

    print(f"\nmedian of {args.repeats} repeat(s): training ms/step ({args.batch_size}×"
          f"{args.target_length} target tokens), decoding ms/batch ({args.decode_batch} "
          f"sentences × {args.decode_length} steps; beam {args.beam_size})")
    header = (f"{'variant':15s} {'embeddings':>12s} {'train ms':>9s} {'×van':>6s} {'×WT':>6s} "
              f"{'greedy ms':>10s} {'×van':>6s} {'×WT':>6s} {'beam ms':>9s} {'×van':>6s} "
              f"{'×WT':>6s}")
    print_header(header)
    for row in rows:
        cells = []
        for task in ("training", "greedy", "beam"):
            cells.append(f"{row[task]['ms']['median']:>{10 if task == 'greedy' else 9}.1f}")
            cells.append(f"{row[task]['vs_vanilla']['throughput_ratio']:>6.3f}")
            wt = row[task].get("vs_decoder_wt", {}).get("throughput_ratio")
            cells.append(f"{wt:>6.3f}" if wt is not None else f"{'':>6s}")
        print(f"{row['variant']:15s} {row['parameters']['embeddings']:>12,} " + " ".join(cells))
    print("(×van / ×WT: throughput relative to vanilla / decoder WT, ratio of the medians; "
          f"goal for shared-private: >= {GOAL} × vanilla)")
    if "shared-private" in args.variant_list:
        row = next(r for r in rows if r["variant"] == "shared-private")
        for task in ("training", "greedy", "beam"):
            ratio = row[task]["vs_vanilla"]["throughput_ratio"]
            print(f"shared-private {task}: {ratio:.3f} × vanilla — goal "
                  f"{'met' if ratio >= GOAL else 'MISSED'}")
    write_record("shared_private", args, machine, started, {"rows": rows})


if __name__ == "__main__":
    sys.exit(main(ARGS))

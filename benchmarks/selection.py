"""Vocabulary selection (issue 56): decoding speed and quality with and without it.

For a trained run (`--run-dir`; an untrained `--preset` model for `--quick`), the first
`--sentences` sentences of `--split` are translated by `Translator` with

- `full`: the whole target vocabulary;
- `lexical`: the run's alignment shortlist (`RUN/shortlist.npz`, built with
  `--top-k` / `--frequent` when missing; `tf-outheads shortlist`);
- `neural`: the run's neural selection (`RUN/selection.json`, chosen on dev for
  `--recall` when missing; only for a run trained with a selection head),

each at every beam width of `--beams`, in turns (`--repeats` passes each, the order
alternated). Printed and recorded per width and variant: seconds, output pieces/s, the
ratio to `full` in the same run (wall clock), the mean candidates per batch and their
recall of the reference pieces, BLEU, and the share of outputs identical to `full`'s.

    python benchmarks/selection.py --quick                              # smoke test
    python benchmarks/selection.py --run-dir runs/lstm-cpu-32k-nvs      # a trained run

Results go to `--output` (JSON, default benchmarks/results/selection.json).
"""

import os
import statistics
import time

from common import (  # benchmarks/ is the script's folder
    add_run_or_preset_arguments, benchmark_parser, interleaved, machine_info, parse_list,
    parse_benchmark_args, start, stats, write_record,
)

QUICK = {"preset": "lstm-cpu-nvs", "vocab_size": 500, "tokenizer_sentences": 2000,
         "sentences": 16, "batch_size": 8, "repeats": 1, "beams": "1", "top_k": 5,
         "frequent": 20}
VARIANTS = ("full", "lexical", "neural")


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    add_run_or_preset_arguments(parser, "lstm-cpu-32k-nvs")
    parser.add_argument("--split", default="test", choices=["dev", "test"],
                        help="the split translated")
    parser.add_argument("--beams", default="1,5", help="beam widths, comma-separated")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per variant")
    parser.add_argument("--top-k", type=int, default=50,
                        help="lexical shortlist, when built here: pieces per source piece")
    parser.add_argument("--frequent", type=int, default=100,
                        help="lexical shortlist, when built here: frequent pieces always in")
    parser.add_argument("--recall", type=float, default=0.99,
                        help="neural selection, when chosen here: dev recall to reach")
    args = parse_benchmark_args(parser, argv, "selection", QUICK, positive=(
        "sentences", "batch_size", "repeats", "top_k"))
    args.beam_list = parse_list(args.beams)
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import numpy as np  # noqa: E402
import sacrebleu  # noqa: E402
import tensorflow as tf  # noqa: E402

from decode import length_options, load_model_and_split  # noqa: E402
from tf_outheads.decoding import NeuralSelection, Translator, build_shortlist  # noqa: E402
from tf_outheads.decoding.selection import Shortlist  # noqa: E402
from tf_outheads_zoo.shortlists import (  # noqa: E402
    build_run_selection, build_run_shortlist, neural_selection_recall, selection_path,
    shortlist_path, shortlist_recall)


def selections(args, model, source_tokenizer, target_tokenizer, train_split):
    """`{variant: Shortlist | NeuralSelection | None}` of the model (module doc)."""
    chosen = {"full": None}
    if args.run_dir:
        path = shortlist_path(args.run_dir)
        chosen["lexical"] = (Shortlist.load(path) if os.path.exists(path) else
                             build_run_shortlist(args.run_dir, args.top_k, args.frequent))
        if model.selection is not None:
            path = selection_path(args.run_dir)
            chosen["neural"] = (NeuralSelection.load(path) if os.path.exists(path) else
                                build_run_selection(args.run_dir, args.recall)[0])
        return chosen
    size = target_tokenizer.vocab_size  # --quick: co-occurrence on the tokenizer's sentences
    chosen["lexical"] = build_shortlist(
        source_tokenizer.tokenize(list(train_split.sources)).to_list(),
        target_tokenizer.tokenize(list(train_split.targets)).to_list(),
        source_tokenizer.vocab_size, size, top_k=args.top_k, frequent=args.frequent)
    if model.selection is not None:
        # An untrained head (a smoke test): the threshold keeping a quarter of the pieces
        # of a batch of training sources.
        batch = source_tokenizer.tokenize(list(train_split.sources[:args.batch_size]))
        scores = tf.reduce_max(model.selection_probabilities(batch.to_tensor()), axis=0)
        chosen["neural"] = NeuralSelection(float(np.quantile(scores.numpy(), 0.75)))
    return chosen


def recall_of(selection, model, source_tokenizer, target_tokenizer, sentences, references,
              batch_size):
    if selection is None:
        return {"recall": 1.0, "candidates": float(target_tokenizer.vocab_size)}
    if isinstance(selection, NeuralSelection):
        return neural_selection_recall(model, source_tokenizer, target_tokenizer, sentences,
                                       references, (selection.threshold,), selection.bucket,
                                       batch_size)[selection.threshold]
    return shortlist_recall(selection, source_tokenizer, target_tokenizer, sentences,
                            references, batch_size)


def measure(args, width, model, source_tokenizer, target_tokenizer, config, chosen,
            sentences, references):
    options = {**length_options(config), "length_penalty": config.decode.length_penalty}
    translators = {name: Translator(model, source_tokenizer, target_tokenizer,
                                    beam_size=width, batch_size=args.batch_size,
                                    shortlist=selection, **options)
                   for name, selection in chosen.items()}
    texts = {name: t.translate(sentences) for name, t in translators.items()}  # tracing
    timings = interleaved(list(translators),
                          lambda name: (len(translators[name].translate(sentences)), None),
                          args.repeats)
    full_seconds = statistics.median(timings["full"]["seconds"])
    rows = []
    for name, timing in timings.items():
        pieces = sum(len(row) for row in
                     target_tokenizer.tokenize(tf.constant(texts[name])).to_list())
        median = statistics.median(timing["seconds"])
        coverage = recall_of(chosen[name], model, source_tokenizer, target_tokenizer,
                             sentences, references, args.batch_size)
        rows.append({
            "beam": width, "variant": name, "sentences": len(sentences),
            "output_pieces": pieces, "seconds": stats(timing["seconds"]),
            "pieces_per_second": pieces / median, "speed_vs_full": full_seconds / median,
            "candidates": coverage["candidates"], "recall": coverage["recall"],
            "bleu": sacrebleu.corpus_bleu(texts[name], [references]).score,
            "identical_to_full": sum(a == b for a, b in zip(texts[name], texts["full"]))
            / len(sentences),
        })
    return rows


def main(args):
    started = time.perf_counter()
    info = machine_info()
    model, source_tokenizer, target_tokenizer, config, description, split = (
        load_model_and_split(args, args.split))
    train_split = split if args.run_dir else split.select(range(min(len(split), 2000)))
    chosen = selections(args, model, source_tokenizer, target_tokenizer, train_split)
    sentences, references = split.sources[:args.sentences], split.targets[:args.sentences]
    print(f"{description}: {len(sentences)} {args.split} sentences, batches of "
          f"{args.batch_size}, {target_tokenizer.vocab_size:,} target pieces, "
          f"{args.repeats} timed passes each", flush=True)
    print(f"{'beam':>4} {'variant':<8}{'s (median)':>11}{'pieces/s':>10}{'× full':>8}"
          f"{'cands':>8}{'recall':>8}{'BLEU':>7}{'= full':>8}")
    rows = []
    for width in args.beam_list:
        for row in measure(args, width, model, source_tokenizer, target_tokenizer, config,
                           chosen, sentences, references):
            rows.append(row)
            print(f"{width:>4} {row['variant']:<8}{row['seconds']['median']:>11.2f}"
                  f"{row['pieces_per_second']:>10.0f}{row['speed_vs_full']:>8.2f}"
                  f"{row['candidates']:>8.0f}{row['recall']:>8.2%}{row['bleu']:>7.2f}"
                  f"{row['identical_to_full']:>8.2f}", flush=True)
    described = {name: (None if s is None else s.describe()) for name, s in chosen.items()}
    return write_record("selection", args, info, started,
                        {"model": description, "selections": described, "rows": rows})


if __name__ == "__main__":
    main(ARGS)

"""`tf-outheads train | translate | evaluate | export` — a thin layer over the library.

    tf-outheads train --preset lstm-cpu-tied --run-dir runs/lstm-cpu-tied
    tf-outheads translate --run-dir runs/lstm-cpu-tied --input src.txt --output hyp.txt
    tf-outheads evaluate --hypotheses runs/lstm-cpu-tied/test.hyp --split test \
        --run-dir runs/lstm-cpu-tied
    tf-outheads export --run-dir runs/lstm-cpu-tied --output exports/translator/1
    tf-outheads average --run-dir runs/lstm-cpu-tied --last 3
    tf-outheads presets [--markdown]; tf-outheads components
    tf-outheads study pappas; tf-outheads results --collect-from runs/study
"""

import argparse
import os
import sys
import traceback

from tf_outheads_zoo import commands
from tf_outheads_zoo.commands import int_tuple
from tf_outheads_zoo.errors import (_is_user_error, _show_library_warnings, error_message,
                                    stopped_exit_status)


def _add_decode_flags(parser, which="", quantize_help=None):
    """The flags of the decoding options (`tf_outheads.decoding.options.DecodeOptions`)
    that `translate` and `export` share, one per option, its destination the option's
    name (`commands._decode_settings` maps them onto `DecodeOptions` by name): a new
    option is one more flag here. Each defaults to the run's `decode` setting of that
    name, else the option's default; `which` prefixes the help ("default " for export,
    whose values are a request's defaults)."""
    parser.add_argument("--beam-size", type=int,
                        help=f"{which}beam width (default: the run's decode.beam_size; 1 = "
                             "greedy)")
    parser.add_argument("--length-penalty", type=float,
                        help=f"{which}GNMT alpha (default: the run's decode.length_penalty)")
    parser.add_argument("--replace-unk", action=argparse.BooleanOptionalAction, default=None,
                        help=f"{which}<unk> replacement: the most-attended source word over each "
                             "<unk> (default: the run's decode.replace_unk)")
    parser.add_argument("--sampling-topk", type=int, metavar="K",
                        help=f"{which}top-k sampling: each piece drawn from the K most "
                             "probable (0: from all)")
    parser.add_argument("--sampling-topp", type=float, metavar="P",
                        help=f"{which}nucleus sampling: from the fewest pieces holding P")
    parser.add_argument("--sampling-temperature", type=float, metavar="T",
                        help=f"{which}sampling temperature: the log-probabilities divided by T "
                             "(default 1)")
    parser.add_argument("--seed", type=int,
                        help=f"{which}sampling seed: the same seed, the same samples (line i "
                             "draws with its own seed from it, in the CLI and the SavedModel)")
    parser.add_argument("--with-alignments", action=argparse.BooleanOptionalAction,
                        default=None,
                        help=f"{which}alignments: 'i-j' per target piece (i: the source piece "
                             "attended to most) after each hypothesis")
    parser.add_argument("--eos-bias", type=float, metavar="B",
                        help=f"{which}bias added to EOS's score at every step, in the head's "
                             "score unit (nats; a cosine for cosine scoring); < 0: longer "
                             "outputs (default: the run's decode.eos_bias)")
    parser.add_argument("--block-repeats", action=argparse.BooleanOptionalAction,
                        default=None, help=f"{which}no piece right after itself (default: "
                                           "the run's decode.block_repeats)")
    parser.add_argument("--max-length-ratio", type=float,
                        help="output limit: ratio × source pieces + offset (default: the "
                             "run's decode.max_length_ratio)")
    parser.add_argument("--max-length-offset", type=int,
                        help="output limit: ratio × source pieces + offset (default: the "
                             "run's decode.max_length_offset)")
    parser.add_argument("--max-source-length", type=int,
                        help="subword pieces kept per source, EOS included (default 256)")
    if quantize_help is None:
        parser.add_argument("--quantize", choices=["int8"], help="int8 weights (slower than "
                            "float32 on CPUs measured: benchmarks/docs/quantize.md)")
    else:
        parser.add_argument("--quantize", help=quantize_help)


def build_parser():
    from tf_outheads_zoo.presets import DEFAULT_PRESET, PRESETS

    parser = argparse.ArgumentParser(prog="tf-outheads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error, not just its message")
    subparsers = parser.add_subparsers(dest="command", required=True)

    train = subparsers.add_parser("train", help="train a preset, print dev/test BLEU")
    train.add_argument("--preset", choices=sorted(PRESETS),
                       help=f"default: the run directory's own preset when it has one "
                            f"(a resume), else {DEFAULT_PRESET}")
    train.add_argument("--config", metavar="RUN_FILE",
                       help="a run file (YAML, or JSON): `preset: NAME` and the keys it "
                            "changes, by section (docs/presets.md); --set and the options "
                            "below apply on top")
    train.add_argument("--run-dir", help="output directory (default runs/PRESET, or "
                                         "runs/<run file name> with --config)")
    train.add_argument("--corpus", help="TSV corpus (default: the embedded Bible corpus)")
    train.add_argument("--max-minutes", type=float, help="wall-clock training budget")
    train.add_argument("--max-steps", type=int,
                       help="optimizer step budget, >= 1 (default: the preset's "
                            "train.max_steps, None in most: no step limit)")
    train.add_argument("--strategy", choices=("default", "mirrored", "multi_worker"),
                       help="tf.distribute strategy: one device, all local GPUs, or the "
                            "workers of TF_CONFIG (default: the preset's train.strategy)")
    train.add_argument("--num-gpus", type=int, help="mirrored: use the first N GPUs")
    train.add_argument("--precision", choices=("float32", "mixed_float16", "mixed_bfloat16"),
                       help="dtype policy (mixed_float16 adds loss scaling)")
    train.add_argument("--accumulation-steps", type=int,
                       help="global batches per optimizer update (gradient accumulation)")
    train.add_argument("--init-from", metavar="RUN_DIR",
                       help="start from this trained run: its weights, pieces, word pairs and "
                            "target table, a fresh optimizer (tf_outheads_zoo/init_from.py)")
    train.add_argument("--init-optimizer", action="store_true", default=None,
                       help="with --init-from: the parent's optimizer moments and step count")
    train.add_argument("--update-vocab", choices=("merge", "replace"),
                       help="with --init-from: the new data's pieces added to the parent's, "
                            "or instead of them; every table moved by piece")
    train.add_argument("--set", action="append", metavar="SECTION.KEY=VALUE",
                       help="override a preset setting, e.g. --set model.head=softmax")
    train.set_defaults(func=commands.train)

    average = subparsers.add_parser(
        "average", help="average the weights of a run's last N backups into a .keras model")
    average.add_argument("--run-dir", required=True)
    average.add_argument("--last", type=int, default=3, help="backups to average (default 3)")
    average.add_argument("--output", help="default RUN_DIR/model.averaged.keras")
    average.set_defaults(func=commands.average)

    translate = subparsers.add_parser("translate", help="translate a file with a trained run")
    translate.add_argument("--run-dir", help="a trained run (the tensorflow engine)")
    translate.add_argument("--engine", choices=("tensorflow", "ctranslate2"),
                           default="tensorflow",
                           help="tensorflow (default: the run's Keras model) or ctranslate2 "
                                "(--model: an export --format ctranslate2 directory)")
    translate.add_argument("--model", metavar="DIR",
                           help="with --engine ctranslate2: the exported directory")
    translate.add_argument("--compute-type", default="default",
                           help="with --engine ctranslate2: CTranslate2's compute type "
                                "(default: the exported weights' type; int8, float32, ...)")
    translate.add_argument("--input", required=True, help="one source sentence per line, or -")
    translate.add_argument("--output", help="hypotheses file (default stdout)")
    translate.add_argument("--batch-size", type=int,
                           help="sentences per decoding batch (default: the run's "
                                "decode.batch_size)")
    translate.add_argument("--n-best", type=int, metavar="K",
                           help="the K best hypotheses of each source (K <= --beam-size), as "
                                "'index ||| translation' lines, best first")
    translate.add_argument("--with-scores", action="store_true",
                           help="add each hypothesis' score (the search's: the sum of its "
                                "log-probabilities, over GNMT's length penalty when α > 0)")
    translate.add_argument("--format", choices=("text", "jsonl"), default="text",
                           help="text (default) or one JSON object per source")
    translate.add_argument("--target-prefix", metavar="FILE",
                           help="one line per source: the text its translation starts with "
                                "(the search continues it; an empty line for none)")
    translate.add_argument("--shortlist", nargs="?", const="", metavar="FILE",
                           help="decode each batch over its shortlist's candidates only "
                                "(vocabulary selection): FILE, or without it the run's "
                                "selection.json (neural) where there is one, else its "
                                "shortlist.npz (tf-outheads shortlist)")
    _add_decode_flags(translate)
    translate.set_defaults(func=commands.translate)

    shortlist = subparsers.add_parser(
        "shortlist", help="build a run's vocabulary selection: a lexical shortlist from its "
                          "training pairs, or the threshold of its neural selection head; "
                          "print recall and size on dev")
    shortlist.add_argument("--run-dir", required=True)
    shortlist.add_argument("--method", choices=("lexical", "neural"), default="lexical",
                           help="lexical (default): alignment shortlist.npz; neural: the "
                                "threshold of the model's selection head (runs trained with "
                                "model.selection, the -nvs presets) → selection.json")
    shortlist.add_argument("--recall", type=float, default=0.99,
                           help="neural: the dev recall of the reference pieces the "
                                "threshold must reach (default 0.99)")
    shortlist.add_argument("--top-k", type=int, default=50,
                           help="target pieces kept per source piece (default 50)")
    shortlist.add_argument("--frequent", type=int, default=100,
                           help="most frequent target pieces always in (default 100)")
    shortlist.add_argument("--bucket", type=int, default=64,
                           help="candidate counts rounded up to a multiple of this, so "
                                "searches are traced once per size (default 64)")
    shortlist.add_argument("--aligner", choices=("eflomal", "co-occurrence"),
                           help="default: eflomal where installed (the align extra), else "
                                "sentence co-occurrence")
    shortlist.set_defaults(func=commands.shortlist)

    score = subparsers.add_parser(
        "score", help="score given translations (forced decoding): log-probabilities per "
                      "sentence and per token")
    score.add_argument("--run-dir", required=True)
    score.add_argument("--source", required=True, help="one source sentence per line")
    score.add_argument("--target", required=True, help="its translation, line by line")
    score.add_argument("--output", help="JSON lines: log_prob, tokens, mean_log_prob "
                                        "(default stdout)")
    score.add_argument("--per-token", action="store_true",
                       help="also each target piece and its log-probability")
    score.add_argument("--batch-size", type=int, help="pairs per pass (default 32)")
    score.set_defaults(func=commands.score)

    export = subparsers.add_parser(
        "export", help="write a SavedModel that translates raw strings (TF Serving), or a "
                       "CTranslate2 model")
    export.add_argument("--run-dir", required=True, help="a trained run (model.keras, tokenizers)")
    export.add_argument("--output", required=True,
                        help="SavedModel directory; for TF Serving a version directory, "
                             "e.g. exports/translator/1")
    export.add_argument("--format", choices=("savedmodel", "ctranslate2"), default="savedmodel",
                        help="savedmodel (default) or ctranslate2 (Transformer models; "
                             "pip install 'tf_outheads[ctranslate2]'; translate with "
                             "translate --engine ctranslate2 --model OUTPUT)")
    export.add_argument("--num-hypotheses", type=int, help="default n-best size (default 1)")
    export.add_argument("--beam-sizes", type=int_tuple,
                        help="beam widths the graph holds, comma-separated (default 1,2,4,5,8)")
    export.add_argument("--max-request-sources", type=int,
                        help="sources one request may hold; more are refused (default 256)")
    export.add_argument("--max-request-pieces", type=int,
                        help="subword pieces one request's sources may hold in all; more are "
                             "refused (default 16384)")
    export.add_argument("--shortlist", nargs="?", const="", metavar="FILE",
                        help="savedmodel: every request decodes over its shortlist's "
                             "candidates (vocabulary selection): FILE, or without it the "
                             "run's shortlist.npz")
    _add_decode_flags(export, "default ", quantize_help=(
        "savedmodel: int8 (slower than float32 on CPUs measured: benchmarks/docs/quantize.md); "
        "ctranslate2: its weight type, int8 (its fast CPU path), int16, float16, ..."))
    export.set_defaults(func=commands.export)

    compare = subparsers.add_parser(
        "compare", help="plot training NLL and dev BLEU of several runs side by side, "
                        "with paired significance tests against the first")
    compare.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    compare.add_argument("--output", required=True, help="directory for the plots and tables")
    compare.add_argument("--labels", nargs="+", help="one name per run (default: directory names)")
    compare.add_argument("--window", type=int, default=50,
                         help="steps in the moving average of the NLL curves (default 50)")
    compare.add_argument("--significance", choices=("bs", "ar", "none"), default="bs",
                         help="sacrebleu's paired test of each run against the first: "
                              "bootstrap resampling (bs, default), approximate "
                              "randomization (ar) or none")
    compare.add_argument("--samples", type=int, default=1000,
                         help="resamples (bs) or trials (ar) of the test (default 1000)")
    compare.set_defaults(func=commands.compare)

    from tf_outheads_zoo.study import DEFAULT_RUNS_DIR, RECORDS_DIR, STUDIES

    study = subparsers.add_parser(
        "study", help="train the seeded runs of a head comparison (docs/results.md)")
    study.add_argument("name", nargs="?", choices=sorted(STUDIES),
                       help="a built-in study (or give --config)")
    study.add_argument("--config", metavar="STUDY_FILE",
                       help="a study file (YAML/JSON: data, budget, seeds, arms, baseline, "
                            "claims; tf_outheads_zoo/study/file.py; the built-in ones are in "
                            "tf_outheads_zoo/study/builtin)")
    study.add_argument("--samples", type=int, default=1000,
                       help="paired bootstrap resamples of the report (default 1000)")
    study.add_argument("--runs-dir",
                       help="where the runs (<arm>/s<seed>), the shared tokenizers and "
                            f"results.md go (default {DEFAULT_RUNS_DIR}/<study> for a "
                            "built-in study, runs/<file name> for a study file)")
    study.add_argument("--arms", help="comma-separated arms (default: all)")
    study.add_argument("--seeds", help="comma-separated seeds, for every arm (default: the "
                                       "study's)")
    study.add_argument("--steps", type=int, help="step budget (default: the study's)")
    study.add_argument("--export-winner", metavar="DIR",
                       help="export the best arm's best seed (by the study's select_by on "
                            "dev) as tf-outheads export's SavedModel, with winner.json")
    study.add_argument("--records-dir",
                       help="where each finished run's light files (scores, curves, "
                            "translations, references) are copied (default: "
                            f"{RECORDS_DIR}/<study> for a built-in study at its own budget, "
                            "else none; '' for none)")
    study.set_defaults(func=commands.study)

    results = subparsers.add_parser(
        "results", help="write the results page (tables, p-values, curves) from the study runs")
    results.add_argument("--runs-dir", default=RECORDS_DIR,
                         help=f"run records (or run directories) to read (default {RECORDS_DIR})")
    results.add_argument("--collect-from", metavar="RUNS_DIR",
                         help="first record the finished runs of this study directory (e.g. "
                              f"{DEFAULT_RUNS_DIR}) in --runs-dir")
    results.add_argument("--output", default=os.path.join("docs", "results.md"))
    results.add_argument("--studies", nargs="+", choices=sorted(STUDIES),
                         help="default: every study")
    results.add_argument("--samples", type=int, default=1000,
                         help="paired bootstrap resamples (default 1000)")
    results.set_defaults(func=commands.results)

    evaluate = subparsers.add_parser("evaluate", help="BLEU/chrF of a hypotheses file")
    evaluate.add_argument("--hypotheses", required=True)
    evaluate.add_argument("--references", nargs="+",
                          help="reference files (first is primary); default: the corpus split")
    evaluate.add_argument("--corpus", help="TSV corpus (default: the embedded Bible corpus)")
    evaluate.add_argument("--split", default="test")
    evaluate.add_argument("--source-column", help="default: es (or the run's setting)")
    evaluate.add_argument("--target-column", help="default: en_web (or the run's setting)")
    evaluate.add_argument("--reference-columns", nargs="*",
                          help="extra reference columns (default: en_kjv)")
    evaluate.add_argument("--keep-boilerplate", action="store_true",
                          help="score against the target column as stored, without "
                               "stripping the corpus's known appended boilerplate")
    evaluate.add_argument("--run-dir", help="also print the model's parameter counts")
    evaluate.add_argument("--json", help="write the scores to this JSON file")
    evaluate.set_defaults(func=commands.evaluate)

    presets = subparsers.add_parser(
        "presets", help="list the presets with one line each (docs/presets.md)")
    presets.add_argument("--markdown", action="store_true",
                         help="print the Markdown catalogue, docs/presets.md")
    presets.set_defaults(func=commands.presets)

    components = subparsers.add_parser(
        "components", help="list the registered model types, heads, losses, optimizers "
                           "and schedules that configurations name")
    components.set_defaults(func=commands.components)
    return parser


# Commands that never need TensorFlow (instant).


COMMANDS_WITHOUT_TENSORFLOW = ("presets",)


def _line_break():
    """A line break before a last line printed to a terminal, where Keras' progress bar
    may have left its line open (`\r` updates); none for a file or a pipe."""
    return "\n" if sys.stderr.isatty() and sys.stdout.isatty() else ""
# Options that are sizes or counts: 0 and negatives are refused by name.
COUNT_OPTIONS = ("beam_size", "n_best", "batch_size", "num_hypotheses", "num_gpus",
                 "accumulation_steps", "last", "max_source_length", "max_request_sources",
                 "max_request_pieces", "window", "samples", "steps", "top_k", "bucket")


def main(argv=None):
    """Runs a command; a user error is printed as one `error: ...` line with exit status 2
    (its traceback with `--debug`); any other exception is a bug and keeps its traceback.
    A training stopped by SIGTERM or Ctrl-C after its backup says so in one `stopped:`
    line, exit status 143 or 130 (`stopped_exit_status`); the same command resumes it."""
    parser = build_parser()
    args = parser.parse_args(argv)
    for name in COUNT_OPTIONS:  # sizes and counts (--max-steps: the schema's own message)
        value, flag = getattr(args, name, None), "--" + name.replace("_", "-")
        if value is not None and value < 1:
            print(f"error: {flag} must be >= 1. Received: {flag} {value}", file=sys.stderr)
            raise SystemExit(2)
    _show_library_warnings()
    if args.command not in COMMANDS_WITHOUT_TENSORFLOW:
        from tf_outheads_zoo.quiet import import_tensorflow

        # Before any module of ours imports it: without start-up notices.
        import_tensorflow(log_level="0" if args.debug else "3")
    try:
        args.func(args)
    except BrokenPipeError:  # output piped into `head`, which closed it: not an error
        sys.stderr.close()
    except Exception as error:
        stopping = sys.modules.get("tf_outheads.training.stopping")
        if stopping and isinstance(error, stopping.TrainingPreempted):  # backup written
            print(f"{_line_break()}stopped: {error}", file=sys.stderr)
            raise SystemExit(stopped_exit_status(error)) from None
        if not _is_user_error(error):
            raise  # a bug: its traceback
        if args.debug:
            traceback.print_exc()
        print(f"{_line_break()}error: {error_message(error)}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

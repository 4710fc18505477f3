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
import ast
import json
import os
import sys
import traceback

from tf_outheads_zoo.errors import (  # noqa: F401 (DISK_FULL ... user_errors: cli's API)
    DISK_FULL, FILE_SYSTEM_FAILURES, PREEMPTED_EXIT_STATUS, _is_user_error,
    _show_library_warnings, error_message, stopped_exit_status, user_errors)


class CommandError(ValueError):
    """A user error of a command: printed as one `error: ...` line, exit status 2."""


def parse_overrides(pairs):
    """`--set section.key=value` strings → `{"section.key": value}`: Python literals
    and JSON (`{"output_structure": false}`) parsed, anything else kept as a string.
    A value that opens a dict or list and parses as neither is refused (kept as a
    string it would only fail later, as a strange name)."""
    overrides = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep:
            raise CommandError(f"--set expects section.key=value. Received: --set {pair}")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            try:
                value = json.loads(raw)
            except ValueError as error:
                if raw.lstrip()[:1] in ("{", "["):
                    raise CommandError(
                        f"--set {key}: the value is neither a Python literal nor JSON "
                        f"({error}). Received: --set {pair}") from None
                value = raw  # a bare string such as head=tied
        overrides[key] = value
    return overrides


def _train(args):
    from tf_outheads_zoo.train import run_training

    overrides = parse_overrides(args.set)
    if args.max_minutes is not None:
        overrides["train.max_minutes"] = args.max_minutes
    if args.max_steps is not None:
        if args.max_steps < 1:  # 0 once meant "no limit"
            raise CommandError(f"--max-steps must be >= 1; for no step limit, omit "
                               "--max-steps (the preset's train.max_steps applies, None in "
                               f"most presets). Received: --max-steps {args.max_steps}")
        overrides["train.max_steps"] = args.max_steps
    if args.corpus is not None:
        overrides["data.corpus"] = args.corpus
    for name in ("strategy", "num_gpus", "precision", "accumulation_steps", "init_from",
                 "init_optimizer", "update_vocab"):
        if getattr(args, name) is not None:
            overrides[f"train.{name}"] = getattr(args, name)
    from tf_outheads_zoo.presets import DEFAULT_PRESET

    # With --config, resolve_preset refuses --preset as well (before anything is written).
    if args.config is not None:
        default_name = os.path.splitext(os.path.basename(args.config))[0]
    else:
        default_name = args.preset or DEFAULT_PRESET
    run_dir = args.run_dir or os.path.join("runs", default_name)
    run_training(args.preset, run_dir, overrides, run_file=args.config)


SAMPLING_OPTIONS = ("sampling_topk", "sampling_topp", "sampling_temperature")
CONSTRAINT_OPTIONS = ("eos_bias", "block_repeats", "quantize")  # decoding.constraints; int8


def _override(options, args, names):
    """The command-line options among `names` that were given replace `options`' values."""
    for name in names:
        value = getattr(args, name)
        if value is not None:
            options[name] = value


def _average(args):
    from tf_outheads_zoo.runs import average_run

    try:
        output, paths = average_run(args.run_dir, args.last, args.output)
    except ValueError as error:
        raise CommandError(str(error)) from None
    print(f"[average] mean of {', '.join(os.path.basename(p) for p in paths)} → {output}")


def _translate(args):
    from tf_outheads.decoding.translator import Translator
    from tf_outheads.metrics import read_lines, split_lines
    from tf_outheads_zoo.runs import load_run

    model, source_tokenizer, target_tokenizer, preset = load_run(args.run_dir)
    # Lines end at "\n" only, for a file and for standard input alike (not at U+2028,
    # form feeds or U+0085, which str.splitlines would split on).
    sources = (read_lines(args.input) if args.input != "-"
               else split_lines(sys.stdin.buffer.read(), "<stdin>"))
    options = dict(preset["decode"])
    _override(options, args, ("batch_size", "beam_size", "length_penalty", "replace_unk",
                              "sampling_topk", "sampling_topp", "sampling_temperature", "seed",
                              *CONSTRAINT_OPTIONS))
    if any(getattr(args, name) is not None for name in SAMPLING_OPTIONS):
        if options.get("beam_size", 1) > 1 and args.beam_size is not None:
            raise CommandError(f"--beam-size {args.beam_size} with sampling: sampling draws "
                               "one piece at a time (leave --beam-size out, or give 1)")
        options["beam_size"] = 1  # the run's beam, when sampling
    n_best = args.n_best or 1
    if n_best > options.get("beam_size", 1):
        raise CommandError(f"--n-best {n_best} needs a beam at least as wide: give "
                           f"--beam-size {n_best} or more (the run decodes with beam size "
                           f"{options.get('beam_size', 1)})")
    prefixes = None
    if args.target_prefix:
        prefixes = read_lines(args.target_prefix)
        if len(prefixes) != len(sources):
            raise CommandError(f"--target-prefix {args.target_prefix} has {len(prefixes)} "
                               f"lines and --input {len(sources)}: give one prefix per source "
                               "(an empty line for none)")
    translator = Translator(model, source_tokenizer, target_tokenizer, **options)
    # Sources longer than the model reads are cut, with a logged warning that counts them.
    hypotheses = translator.translate(sources, num_hypotheses=n_best, with_scores=True,
                                      target_prefix=prefixes,
                                      with_alignments=args.with_alignments)
    if n_best == 1:
        hypotheses = [[item] for item in hypotheses]
    text = "".join(line + "\n" for line in _hypothesis_lines(hypotheses, args))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)


def _hypothesis_lines(hypotheses, args):
    """The lines `translate` writes: one translation per source (the default); with
    `--n-best` or `--with-scores`, `index ||| translation [||| score]` per hypothesis,
    best first, as Moses and fairseq write n-best lists; `--with-alignments` appends
    ` ||| i-j ...` (OpenNMT-py's `-report_align`); with `--format jsonl`, one JSON object
    per source (`index`, `hypotheses`: `text` [, `score`] [, `alignment`])."""
    for index, row in enumerate(hypotheses):
        if args.format == "jsonl":
            yield json.dumps({"index": index, "hypotheses": [
                {"text": item[0], **({"score": item[1]} if args.with_scores else {}),
                 **({"alignment": item[-1]} if args.with_alignments else {})}
                for item in row]}, ensure_ascii=False)
        elif args.n_best and args.n_best > 1 or args.with_scores:
            for item in row:
                yield (f"{index} ||| {item[0]}" + (f" ||| {item[1]:.6f}" if args.with_scores
                                                   else "")
                       + (f" ||| {item[-1]}" if args.with_alignments else ""))
        else:
            yield row[0][0] + (f" ||| {row[0][-1]}" if args.with_alignments else "")


def _score(args):
    from tf_outheads.decoding.scoring import Scorer
    from tf_outheads.metrics import read_lines
    from tf_outheads_zoo.runs import load_run

    sources, targets = read_lines(args.source), read_lines(args.target)
    if len(sources) != len(targets):
        raise CommandError(f"--source {args.source} has {len(sources)} lines and --target "
                           f"{args.target} has {len(targets)}: one translation per source")
    model, source_tokenizer, target_tokenizer, _ = load_run(args.run_dir)
    options = {"batch_size": args.batch_size} if args.batch_size else {}
    scorer = Scorer(model, source_tokenizer, target_tokenizer, **options)
    results = scorer.score(sources, targets, per_token=args.per_token)
    lines = [json.dumps(r, ensure_ascii=False) for r in results]
    if args.output in (None, "-"):
        sys.stdout.write("".join(line + "\n" for line in lines))
    else:
        with open(args.output + ".tmp", "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
        os.replace(args.output + ".tmp", args.output)
    tokens = sum(r["tokens"] for r in results)
    total = sum(r["log_prob"] for r in results)
    kind = ("cross-entropy" if scorer.log_probabilities
            else f"mean score (not a log-probability: scoring={model.head.scoring!r})")
    print(f"[score] {len(results)} pairs, {tokens} target tokens (EOS included): "
          f"{kind} {-total / max(tokens, 1):.4f} nats per token", file=sys.stderr)


def _compare(args):
    from tf_outheads_zoo.compare import compare_runs

    compare_runs(args.run_dirs, args.output, labels=args.labels, window=args.window,
                 significance=None if args.significance == "none" else args.significance,
                 samples=args.samples)


def _study(args):
    from tf_outheads_zoo.study import (DEFAULT_RUNS_DIR, RECORDS_DIR, builtin_study_path,
                                       export_winner, run_study, write_study_results)
    from tf_outheads_zoo.study.file import read_study_file

    if (args.name is None) == (args.config is None):
        raise CommandError("study takes a built-in study's name or --config STUDY_FILE, one "
                           f"of the two. Received: name={args.name!r}, --config={args.config!r}")
    seeds = _int_tuple(args.seeds) if args.seeds else None
    arms = [a for a in args.arms.split(",") if a] if args.arms else None
    # A built-in study is its shipped study file, run the same way.
    path = args.config or builtin_study_path(args.name)
    name = args.name or os.path.splitext(os.path.basename(args.config))[0]
    study = read_study_file(path)
    runs_dir = args.runs_dir or (os.path.join(DEFAULT_RUNS_DIR, name) if args.name
                                 else os.path.join("runs", name))
    records_dir = args.records_dir
    if records_dir is None and args.name and not args.steps:
        # The built-in studies' records are committed (docs/results.md is written from
        # them): only runs at the shipped budget are recorded.
        records_dir = os.path.join(RECORDS_DIR, name)
    study = run_study(name, runs_dir, arms=arms, seeds=seeds, steps=args.steps, study=study,
                      records_dir=records_dir or None)
    numbers = write_study_results(name, study, runs_dir, samples=args.samples)
    if args.export_winner:
        export_winner(numbers, args.export_winner)


def _results(args):
    from tf_outheads_zoo.study import STUDIES, collect_records, write_results

    if args.collect_from:
        count = sum(collect_records(os.path.join(args.collect_from, name),
                                    os.path.join(args.runs_dir, name), log=lambda *_: None)
                    for name in (args.studies or STUDIES))
        print(f"[results] {count} finished run(s) of {args.collect_from} recorded in "
              f"{args.runs_dir}")
    write_results(args.runs_dir, args.output, studies=args.studies, samples=args.samples)


def _int_tuple(text):
    """`"1,2,4"` → `(1, 2, 4)` (argparse type of --beam-sizes)."""
    try:
        return tuple(int(value) for value in text.split(",") if value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None


def _add_constraint_flags(parser, which=""):
    """--eos-bias, --block-repeats/--no-block-repeats (default: the run's decode.*), --quantize."""
    parser.add_argument("--eos-bias", type=float, metavar="B",
                        help=f"{which}bias added to EOS's score at every step, in the head's "
                             "score unit (nats; a cosine for cosine scoring); < 0: longer "
                             "outputs (default: the run's decode.eos_bias)")
    parser.add_argument("--block-repeats", action=argparse.BooleanOptionalAction,
                        default=None, help=f"{which}no piece right after itself (default: "
                                           "the run's decode.block_repeats)")
    parser.add_argument("--quantize", choices=["int8"], help="int8 weights (slower than "
                        "float32 on CPUs measured: benchmarks/docs/quantize.md)")


def _export(args):
    from tf_outheads_zoo.runs import export_run

    # Defaults of the SavedModel's signatures: the run's decoding settings,
    # unless given here.
    options = {}
    _override(options, args, ("beam_size", "length_penalty", "num_hypotheses", "replace_unk",
                              "beam_sizes", "max_source_length", "max_request_sources",
                              "max_request_pieces", *CONSTRAINT_OPTIONS))
    path = export_run(args.run_dir, args.output, **options)
    print(f"[export] SavedModel written to {path} (signatures serving_default, translate; "
          f"see serving/README.md)")


def _evaluate(args):
    from tf_outheads.metrics import evaluate_translations, format_report, read_lines
    from tf_outheads_zoo.presets import DEFAULT_PRESET, get_preset
    from tf_outheads_zoo.splits import read_split

    hypotheses = read_lines(args.hypotheses)
    if args.references:
        references = {os.path.basename(p): read_lines(p) for p in args.references}
        primary = os.path.basename(args.references[0])
    else:
        # Score against the corpus exactly as training reads it: the run's own
        # data settings when --run-dir is given, else the default preset's.
        if args.run_dir:
            from tf_outheads_zoo.stored import read_stored_preset

            data_config = read_stored_preset(os.path.join(args.run_dir, "preset.json"))[1]["data"]
        else:
            data_config = get_preset(DEFAULT_PRESET)["data"]
        for key, value in (("corpus", args.corpus), ("source_column", args.source_column),
                           ("target_column", args.target_column),
                           ("reference_columns", args.reference_columns)):
            if value is not None:
                data_config[key] = value
                data_config[args.split] = None  # the split of the corpus given here
        if args.keep_boilerplate:
            data_config["strip_target_suffixes"] = []
        corpus = read_split(data_config, args.split)
        primary = corpus.target_name
        references = corpus.reference_streams()
    # evaluate_translations refuses streams whose line count differs from the
    # hypotheses' (sacrebleu's Python API would silently score the shorter one).
    try:
        results = evaluate_translations(hypotheses, references, primary=primary)
    except ValueError as error:
        raise CommandError(f"{args.hypotheses}: {error}") from None
    print(format_report(results))
    report = {name: {"score": s.score, "signature": s.signature} for name, s in results.items()}
    if args.run_dir:
        from tf_outheads.metrics import parameter_report
        from tf_outheads_zoo.runs import load_run

        params = parameter_report(load_run(args.run_dir)[0])
        print(params)
        report["parameters"] = params.groups
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)


def _presets(args):
    from tf_outheads_zoo.catalogue import print_presets, presets_markdown

    if args.markdown:
        sys.stdout.write(presets_markdown())
    else:
        print_presets()


def _components(args):
    from tf_outheads_zoo.catalogue import components_text

    sys.stdout.write(components_text())


def build_parser():
    from tf_outheads_zoo.presets import DEFAULT_PRESET, PRESETS

    parser = argparse.ArgumentParser(prog="tf-outheads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--debug", action="store_true",
                        help="print the traceback of an error, not just its message")
    commands = parser.add_subparsers(dest="command", required=True)

    train = commands.add_parser("train", help="train a preset, print dev/test BLEU")
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
    train.set_defaults(func=_train)

    average = commands.add_parser(
        "average", help="average the weights of a run's last N backups into a .keras model")
    average.add_argument("--run-dir", required=True)
    average.add_argument("--last", type=int, default=3, help="backups to average (default 3)")
    average.add_argument("--output", help="default RUN_DIR/model.averaged.keras")
    average.set_defaults(func=_average)

    translate = commands.add_parser("translate", help="translate a file with a trained run")
    translate.add_argument("--run-dir", required=True)
    translate.add_argument("--input", required=True, help="one source sentence per line, or -")
    translate.add_argument("--output", help="hypotheses file (default stdout)")
    translate.add_argument("--batch-size", type=int)
    translate.add_argument("--beam-size", type=int,
                           help="beam width (default: the run's decode.beam_size; 1 = greedy)")
    translate.add_argument("--length-penalty", type=float,
                           help="GNMT alpha (default: the run's decode.length_penalty)")
    translate.add_argument("--replace-unk", action=argparse.BooleanOptionalAction, default=None,
                           help="copy the most-attended source word over each <unk> "
                                "(default: the run's decode.replace_unk)")
    translate.add_argument("--n-best", type=int, metavar="K",
                           help="the K best hypotheses of each source (K <= --beam-size), as "
                                "'index ||| translation' lines, best first")
    translate.add_argument("--with-scores", action="store_true",
                           help="add each hypothesis' score (the search's: the sum of its "
                                "log-probabilities, over GNMT's length penalty when α > 0)")
    translate.add_argument("--format", choices=("text", "jsonl"), default="text",
                           help="text (default) or one JSON object per source")
    translate.add_argument("--sampling-topk", type=int, metavar="K",
                           help="sample each piece from the K most probable (0: from all)")
    translate.add_argument("--sampling-topp", type=float, metavar="P",
                           help="sample from the nucleus: the fewest pieces holding P")
    translate.add_argument("--sampling-temperature", type=float, metavar="T",
                           help="sample with the log-probabilities divided by T (default 1)")
    translate.add_argument("--with-alignments", action="store_true",
                           help="append each hypothesis' alignment, 'i-j' per target piece "
                                "(i: the source piece attended to most)")
    translate.add_argument("--target-prefix", metavar="FILE",
                           help="one line per source: the text its translation starts with "
                                "(the search continues it; an empty line for none)")
    translate.add_argument("--seed", type=int,
                           help="sampling seed: the same seed, the same samples (line i draws "
                                "with its own seed from it, as the SavedModel does)")
    _add_constraint_flags(translate)
    translate.set_defaults(func=_translate)

    score = commands.add_parser(
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
    score.set_defaults(func=_score)

    export = commands.add_parser(
        "export", help="write a SavedModel that translates raw strings (TF Serving)")
    export.add_argument("--run-dir", required=True, help="a trained run (model.keras, tokenizers)")
    export.add_argument("--output", required=True,
                        help="SavedModel directory; for TF Serving a version directory, "
                             "e.g. exports/translator/1")
    export.add_argument("--beam-size", type=int,
                        help="default beam width (default: the run's decode.beam_size)")
    export.add_argument("--length-penalty", type=float,
                        help="default GNMT alpha (default: the run's decode.length_penalty)")
    export.add_argument("--num-hypotheses", type=int, help="default n-best size (default 1)")
    export.add_argument("--replace-unk", action=argparse.BooleanOptionalAction, default=None,
                        help="default for <unk> replacement (default: the run's "
                             "decode.replace_unk, else off)")
    export.add_argument("--beam-sizes", type=_int_tuple,
                        help="beam widths the graph holds, comma-separated (default 1,2,4,5,8)")
    export.add_argument("--max-source-length", type=int,
                        help="subword pieces kept per source, EOS included (default 256)")
    export.add_argument("--max-request-sources", type=int,
                        help="sources one request may hold; more are refused (default 256)")
    export.add_argument("--max-request-pieces", type=int,
                        help="subword pieces one request's sources may hold in all; more are "
                             "refused (default 16384)")
    _add_constraint_flags(export, "default ")
    export.set_defaults(func=_export)

    compare = commands.add_parser(
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
    compare.set_defaults(func=_compare)

    from tf_outheads_zoo.study import DEFAULT_RUNS_DIR, RECORDS_DIR, STUDIES

    study = commands.add_parser(
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
    study.set_defaults(func=_study)

    results = commands.add_parser(
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
    results.set_defaults(func=_results)

    evaluate = commands.add_parser("evaluate", help="BLEU/chrF of a hypotheses file")
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
    evaluate.set_defaults(func=_evaluate)

    presets = commands.add_parser(
        "presets", help="list the presets with one line each (docs/presets.md)")
    presets.add_argument("--markdown", action="store_true",
                         help="print the Markdown catalogue, docs/presets.md")
    presets.set_defaults(func=_presets)

    components = commands.add_parser(
        "components", help="list the registered model types, heads, losses, optimizers "
                           "and schedules that configurations name")
    components.set_defaults(func=_components)
    return parser


# Commands that never need TensorFlow (instant).
COMMANDS_WITHOUT_TENSORFLOW = ("presets",)


def main(argv=None):
    """Runs a command; a user error is printed as one `error: ...` line with exit status 2
    (its traceback with `--debug`); any other exception is a bug and keeps its traceback.
    A training stopped by SIGTERM or Ctrl-C after its backup says so in one `stopped:`
    line, exit status 143 or 130 (`stopped_exit_status`); the same command resumes it."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
        trainer = sys.modules.get("tf_outheads.training.trainer")
        if trainer and isinstance(error, trainer.TrainingPreempted):  # backup written
            print(f"stopped: {error}", file=sys.stderr)
            raise SystemExit(stopped_exit_status(error)) from None
        if not _is_user_error(error):
            raise  # a bug: its traceback
        if args.debug:
            traceback.print_exc()
        print(f"error: {error_message(error)}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()

"""The commands of `tf-outheads` (`tf_outheads_zoo.cli` parses their arguments and reports
their errors): one function per command, taking the parsed arguments.

Each imports what it needs when it runs, so that `tf-outheads presets` loads no
TensorFlow and `--help` is instant.
"""

import argparse
import ast
import dataclasses
import json
import os
import sys


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


def train(args):
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

    # With --config, resolve_run_config refuses --preset as well (before anything is written).
    if args.config is not None:
        default_name = os.path.splitext(os.path.basename(args.config))[0]
    else:
        default_name = args.preset or DEFAULT_PRESET
    run_dir = args.run_dir or os.path.join("runs", default_name)
    run_training(args.preset, run_dir, overrides, run_file=args.config)


def _override(options, args, names):
    """The command-line options among `names` that were given replace `options`' values."""
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            options[name] = value


def _decode_settings(settings, args):
    """`DecodeOptions` keywords: the run's `decode` settings that are decoding options
    (the mapping of `DecodeConfig` onto `tf_outheads.decoding.options.DecodeOptions`:
    the same names), each replaced by its command-line flag when given (a flag's
    destination is the option's name), over every field of `DecodeOptions`: a new
    option needs only its flag (`cli._add_decode_flags`). A sampling flag without
    `--beam-size` decodes with width 1 (the run's beam is not for sampling); with a
    wider `--beam-size` it is refused."""
    from tf_outheads.decoding import options as decoding_options

    names = [field.name for field in dataclasses.fields(decoding_options.DecodeOptions)]
    values = {name: settings[name] for name in names if name in settings}
    _override(values, args, names)
    if any(getattr(args, name, None) is not None for name in decoding_options.SAMPLING_OPTIONS):
        if args.beam_size is not None and args.beam_size > 1:
            raise CommandError(f"--beam-size {args.beam_size} with sampling: sampling draws "
                               "one piece at a time (leave --beam-size out, or give 1)")
        values["beam_size"] = 1  # the run's beam, when sampling
    return values


def average(args):
    from tf_outheads_zoo.runs import average_run

    try:
        output, paths = average_run(args.run_dir, args.last, args.output)
    except ValueError as error:
        raise CommandError(str(error)) from None
    print(f"[average] mean of {', '.join(os.path.basename(p) for p in paths)} → {output}")


def translate(args):
    from tf_outheads.metrics import read_lines, split_lines

    if args.engine == "ctranslate2":
        defaults, make_translator = _ctranslate2_engine(args)
    else:
        from tf_outheads.decoding.translator import Translator
        from tf_outheads_zoo.runs import load_run

        if args.model is not None:
            raise CommandError("--model DIR goes with --engine ctranslate2 (an export "
                               "--format ctranslate2 directory)")
        if args.run_dir is None:
            raise CommandError("--run-dir: the trained run to translate with (or --engine "
                               "ctranslate2 --model DIR)")
        model, source_tokenizer, target_tokenizer, config = load_run(args.run_dir)
        defaults = config.decode.options()
        shortlist = None
        if args.shortlist is not None:
            from tf_outheads_zoo.shortlists import load_run_shortlist

            shortlist = load_run_shortlist(args.run_dir, args.shortlist or None)
        # The options by name: `Translator` checks them once, as a `DecodeOptions`.
        make_translator = lambda settings: Translator(  # noqa: E731
            model, source_tokenizer, target_tokenizer, shortlist=shortlist, **settings)
    settings = _decode_settings(defaults, args)
    # Lines end at "\n" only, for a file and for standard input alike (not at U+2028,
    # form feeds or U+0085, which str.splitlines would split on).
    sources = (read_lines(args.input) if args.input != "-"
               else split_lines(sys.stdin.buffer.read(), "<stdin>"))
    n_best = args.n_best or 1
    if n_best > settings.get("beam_size", 1):
        raise CommandError(f"--n-best {n_best} needs a beam at least as wide: give "
                           f"--beam-size {n_best} or more (the run decodes with beam size "
                           f"{settings.get('beam_size', 1)})")
    prefixes = None
    if args.target_prefix:
        prefixes = read_lines(args.target_prefix)
        if len(prefixes) != len(sources):
            raise CommandError(f"--target-prefix {args.target_prefix} has {len(prefixes)} "
                               f"lines and --input {len(sources)}: give one prefix per source "
                               "(an empty line for none)")
    settings["num_hypotheses"] = n_best
    translator = make_translator(settings)
    # Sources longer than the model reads are cut, with a logged warning that counts them.
    hypotheses = translator.translate(sources, with_scores=True, target_prefix=prefixes)
    if n_best == 1:
        hypotheses = [[item] for item in hypotheses]
    text = "".join(line + "\n" for line in _hypothesis_lines(
        hypotheses, args, bool(settings.get("with_alignments"))))
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)


def shortlist(args):
    from tf_outheads_zoo.shortlists import (build_run_selection, build_run_shortlist,
                                            report_dev_recall)

    if args.method == "neural":
        try:
            build_run_selection(args.run_dir, recall=args.recall, bucket=args.bucket)
        except ValueError as error:
            raise CommandError(str(error)) from None
        return
    if args.frequent < 0:
        raise CommandError(f"--frequent must be >= 0. Received: --frequent {args.frequent}")
    built = build_run_shortlist(args.run_dir, top_k=args.top_k, frequent=args.frequent,
                                bucket=args.bucket, aligner=args.aligner)
    report_dev_recall(args.run_dir, built)


def _ctranslate2_engine(args):
    """`translate --engine ctranslate2`: the export's recorded decoding defaults, and a
    function of the settings giving its `CTranslate2Translator` (the defaults it does not
    take left out, a flag it does not take refused by name)."""
    from tf_outheads.export.ctranslate2 import import_ctranslate2
    from tf_outheads.export.ctranslate2_translator import (SUPPORTED_OPTIONS,
                                                           CTranslate2Translator,
                                                           read_export_metadata)

    if args.model is None:
        raise CommandError("--engine ctranslate2 needs --model DIR (an export --format "
                           "ctranslate2 directory)")
    if args.run_dir is not None:
        raise CommandError("--run-dir goes with the tensorflow engine; --engine ctranslate2 "
                           "reads everything from --model")
    if args.shortlist is not None:
        raise CommandError("--shortlist goes with the tensorflow engine (CTranslate2's "
                           "vocabulary map is not made from it yet)")
    try:
        import_ctranslate2()  # the optional extra: before anything else is read
    except ImportError as error:
        raise CommandError(str(error)) from None

    def make_translator(settings):
        settings = {k: v for k, v in settings.items()
                    if k in SUPPORTED_OPTIONS or getattr(args, k, None) is not None}
        try:
            return CTranslate2Translator(args.model, compute_type=args.compute_type,
                                         **settings)
        except ValueError as error:
            raise CommandError(str(error)) from None

    return read_export_metadata(args.model).get("decode", {}), make_translator


def _hypothesis_lines(hypotheses, args, with_alignments=False):
    """The lines `translate` writes: one translation per source (the default); with
    `--n-best` or `--with-scores`, `index ||| translation [||| score]` per hypothesis,
    best first, as Moses and fairseq write n-best lists; `--with-alignments` appends
    ` ||| i-j ...` (OpenNMT-py's `-report_align`); with `--format jsonl`, one JSON object
    per source (`index`, `hypotheses`: `text` [, `score`] [, `alignment`])."""
    for index, row in enumerate(hypotheses):
        if args.format == "jsonl":
            yield json.dumps({"index": index, "hypotheses": [
                {"text": item[0], **({"score": item[1]} if args.with_scores else {}),
                 **({"alignment": item[-1]} if with_alignments else {})}
                for item in row]}, ensure_ascii=False)
        elif args.n_best and args.n_best > 1 or args.with_scores:
            for item in row:
                yield (f"{index} ||| {item[0]}" + (f" ||| {item[1]:.6f}" if args.with_scores
                                                   else "")
                       + (f" ||| {item[-1]}" if with_alignments else ""))
        else:
            yield row[0][0] + (f" ||| {row[0][-1]}" if with_alignments else "")


def score(args):
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


def compare(args):
    from tf_outheads_zoo.compare import compare_runs

    compare_runs(args.run_dirs, args.output, labels=args.labels, window=args.window,
                 significance=None if args.significance == "none" else args.significance,
                 samples=args.samples)


def study(args):
    from tf_outheads_zoo.study import (DEFAULT_RUNS_DIR, RECORDS_DIR, builtin_study_path,
                                       export_winner, run_study, write_study_results)
    from tf_outheads_zoo.study.file import read_study_file

    if (args.name is None) == (args.config is None):
        raise CommandError("study takes a built-in study's name or --config STUDY_FILE, one "
                           f"of the two. Received: name={args.name!r}, --config={args.config!r}")
    seeds = int_tuple(args.seeds) if args.seeds else None
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


def results(args):
    from tf_outheads_zoo.study import STUDIES, collect_records, write_results

    if args.collect_from:
        count = sum(collect_records(os.path.join(args.collect_from, name),
                                    os.path.join(args.runs_dir, name), log=lambda *_: None)
                    for name in (args.studies or STUDIES))
        print(f"[results] {count} finished run(s) of {args.collect_from} recorded in "
              f"{args.runs_dir}")
    write_results(args.runs_dir, args.output, studies=args.studies, samples=args.samples)


def export(args):
    from tf_outheads_zoo.runs import export_run, export_run_ctranslate2

    # Defaults of the SavedModel's signatures: the run's decoding settings
    # (`export_run`), unless given here.
    options = _decode_settings({}, args)
    if args.format == "ctranslate2":
        given = [f"--{name.replace('_', '-')}" for name in
                 ("beam_sizes", "max_request_sources", "max_request_pieces", "shortlist")
                 if getattr(args, name) is not None]
        if given:
            raise CommandError(f"{', '.join(given)}: SavedModel options; a CTranslate2 model "
                               "takes none of them (leave them out with --format ctranslate2)")
        quantization = options.pop("quantize", None)
        try:
            path, dropped = export_run_ctranslate2(args.run_dir, args.output, quantization,
                                                   **options)
        except ImportError as error:  # the optional extra is not installed
            raise CommandError(str(error)) from None
        print(f"[export] CTranslate2 model written to {path} (weights "
              f"{quantization or 'float32'}; translate with: tf-outheads translate --engine "
              f"ctranslate2 --model {path} --input FILE)")
        if dropped:
            print(f"[export] decoding defaults CTranslate2 does not take were left out: "
                  f"{', '.join(f'{k}={v!r}' for k, v in dropped.items())}")
        return
    if options.get("quantize") not in (None, "int8"):
        raise CommandError(f"--quantize {options['quantize']}: a SavedModel takes int8 only "
                           "(the other weight types are CTranslate2's: --format ctranslate2)")
    _override(options, args, ("beam_sizes", "max_request_sources", "max_request_pieces"))
    if args.shortlist is not None:
        from tf_outheads_zoo.shortlists import load_run_shortlist

        options["shortlist"] = load_run_shortlist(args.run_dir, args.shortlist or None)
    from tf_outheads.export.translator_module import SIGNATURE_KEYS

    path = export_run(args.run_dir, args.output, **options)
    print(f"[export] SavedModel written to {path} (signatures {', '.join(SIGNATURE_KEYS)}; "
          f"see serving/README.md)")


def evaluate(args):
    from tf_outheads.metrics import evaluate_translations, format_report, read_lines
    from tf_outheads_zoo.presets import DEFAULT_PRESET, preset_config
    from tf_outheads_zoo.splits import read_split

    hypotheses = read_lines(args.hypotheses)
    if args.references:
        references = {os.path.basename(p): read_lines(p) for p in args.references}
        primary = os.path.basename(args.references[0])
    else:
        # Score against the corpus exactly as training reads it: the run's own
        # data settings when --run-dir is given, else the default preset's.
        if args.run_dir:
            from tf_outheads_zoo.runs import stored_run

            data_config = stored_run(args.run_dir, required=True)[1].data
        else:
            data_config = preset_config(DEFAULT_PRESET).data
        changes = {}
        for key, value in (("corpus", args.corpus), ("source_column", args.source_column),
                           ("target_column", args.target_column),
                           ("reference_columns", args.reference_columns)):
            if value is not None:
                changes.update({key: value, args.split: None})  # the split of this corpus
        if args.keep_boilerplate:
            changes["strip_target_suffixes"] = []
        corpus = read_split(dataclasses.replace(data_config, **changes), args.split)
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


def presets(args):
    from tf_outheads_zoo.catalogue import print_presets, presets_markdown

    if args.markdown:
        sys.stdout.write(presets_markdown())
    else:
        print_presets()


def components(args):
    from tf_outheads_zoo.catalogue import components_text

    sys.stdout.write(components_text())


def int_tuple(text):
    """`"1,2,4"` → `(1, 2, 4)` (argparse type of --beam-sizes and --seeds)."""
    try:
        return tuple(int(value) for value in text.split(",") if value.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints, got {text!r}") from None

"""Decoding speed: `Translator` against the exported SavedModel; search bookkeeping vs model.

Two measurements in one run, on CPU:

(a) Throughput. The first `--sentences` dev sentences (the run's corpus and
    splits), translated greedily and with each beam width of `--beams`
    (default 1, 4, 8) by
    - `translator`: `tf_outheads.decoding.Translator(beam_size=k)`, batches of
      `--batch-size` sentences sorted by length;
    - `savedmodel`: the model exported with
      `tf_outheads.export.export_translator` and reloaded with
      `tf.saved_model.load`, its `translate` signature called with
      `beam_size=[k]` on the same batches (sorted by length, `--batch-size`
      each): tokenization and detokenization inside the graph.
    Two more rows, in the same turns: `sampling`, the Translator sampling
    (nucleus p = 0.9, seed 1; width 1), and `scoring`, forced decoding of the
    dev references (`tf_outheads.decoding.Scorer`, batches of `--batch-size`
    pairs; its tokens are the references' pieces).
    One untimed pass per (decoder, width) first (tracing), then `--repeats`
    passes, the decoders taking turns (A B, B A, ...). Reported: sentences/s,
    target tokens/s (subword pieces of the translations, EOS not counted;
    both decoders give the same strings, which the table checks) and the
    SavedModel's speed relative to the Translator.

(b) Search bookkeeping against the model step. For each width, one batch of
    `--batch-size` dev sentences is decoded for exactly `--steps` steps (EOS
    blocked, no early stop, so both variants run the same steps) with
    - the model's step function (`model.make_step_fn(head cache)`: decoder
      LSTM, attention, output layer), and
    - a trivial step function of the same shapes: it returns one constant
      `(batch·k, V)` tensor of log-probabilities, made before the loop, and
      the state it was given (which the search still reorders at every step).
    The encoder runs outside the timed call. Trivial / real time is the share
    of search bookkeeping (top-k over k·V candidates, beam reordering of the
    decoder state, finished pool, stopping rule); the rest is the model step.

Model: `--run-dir` of a trained run (`model.keras`, tokenizers, `run.json`). Without
it, nothing is trained: an untrained `--preset` model (default `lstm-cpu`) with
a tokenizer trained once on the corpus (cached in `benchmarks/.cache/`).
Caveat: an untrained model rarely emits EOS, so every sentence runs to its
length limit (ratio 1.5 × source + 10) and beam search never stops early; its
sentences/s are a lower bound on a trained model's (tokens/s are comparable).

    python benchmarks/decode.py --quick                      # smoke test (< 2 min)
    python benchmarks/decode.py --run-dir runs/lstm-cpu      # a trained run
    python benchmarks/decode.py                              # untrained lstm-cpu

Results go to `--output` (JSON, default benchmarks/results/decode.json).
"""

import os
import pathlib
import tempfile
import time

from common import (  # benchmarks/ is the script's folder
    add_run_or_preset_arguments, benchmark_parser, int_list, interleaved, machine_info,
    parse_benchmark_args, start, stats, write_record,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

QUICK = {
    "preset": "lstm-tiny",
    "vocab_size": 500,
    "tokenizer_sentences": 2000,
    "sentences": 8,
    "batch_size": 8,
    "beams": "1,4",
    "repeats": 1,
    "steps": 6,
}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    add_run_or_preset_arguments(parser, "lstm-cpu")
    parser.add_argument("--beams", default="1,4,8", help="beam widths (1: greedy)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per decoder")
    parser.add_argument("--steps", type=int, default=30,
                        help="(b): decoding steps per bookkeeping measurement")
    parser.add_argument("--export-dir", help="where to export (default: a temporary folder)")
    args = parse_benchmark_args(parser, argv, "decode", QUICK, positive=(
        "sentences", "batch_size", "repeats", "steps"))
    args.beam_list = int_list(parser, "beams", args.beams, 1)
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads import data  # noqa: E402
from tf_outheads.data.special_tokens import PAD_ID  # noqa: E402
from tf_outheads.decoding import Scorer, Translator, beam_search, greedy_search  # noqa: E402
from tf_outheads.export import export_translator  # noqa: E402
from tf_outheads_zoo.components import build_model  # noqa: E402
from tf_outheads_zoo.presets import preset_config  # noqa: E402
from tf_outheads_zoo.runs import load_run  # noqa: E402
from tf_outheads_zoo.splits import read_split  # noqa: E402

UNTRAINED_CAVEAT = (
    "untrained model: it rarely emits EOS, so sentences run to their length limit and beam "
    "search never stops early; sentences/s are a lower bound for a trained model")


def load_model(args, log=print):
    """`(model, source_tokenizer, target_tokenizer, config, description)`, `config` the
    run's (or the preset's) `RunConfig`."""
    if args.run_dir:
        model, source_tokenizer, target_tokenizer, config = load_run(args.run_dir)
        return model, source_tokenizer, target_tokenizer, config, f"trained run {args.run_dir}"
    config = preset_config(args.preset)
    vocab_size = args.vocab_size or config.data.vocab_size
    train = read_split(config.data, "train", log=lambda *_: None)
    if args.tokenizer_sentences:
        train = train.select(range(min(args.tokenizer_sentences, len(train))))
    cache = REPO_ROOT / "benchmarks" / ".cache" / f"decode_{args.preset}_{vocab_size}_{len(train)}"
    source_tokenizer, target_tokenizer = data.build_tokenizers(
        train.sources, train.targets, cache, vocab_size=vocab_size,
        joint=config.data.joint_vocabulary, model_type=config.data.tokenizer_type,
        seed=config.train.seed)
    keras.utils.set_random_seed(config.train.seed)
    model = build_model(config, source_tokenizer.vocab_size, target_tokenizer.vocab_size)
    if hasattr(model.head, "set_target_vectors"):  # continuous head: random unit table
        vectors = np.random.default_rng(0).normal(
            size=(target_tokenizer.vocab_size, model.head.output_dim)).astype("float32")
        model.head.set_target_vectors(vectors)
    # Seeding frees SentencePiece resources made before it: fresh tokenizers.
    source_tokenizer = data.SubwordTokenizer.from_bytes(source_tokenizer.model_proto)
    target_tokenizer = (source_tokenizer if source_tokenizer.model_proto
                        == target_tokenizer.model_proto else
                        data.SubwordTokenizer.from_bytes(target_tokenizer.model_proto))
    return (model, source_tokenizer, target_tokenizer, config,
            f"untrained {args.preset} (vocabulary {source_tokenizer.vocab_size})")


def load_model_and_split(args, split="dev"):
    """`load_model`'s five, then the configuration's `split` (a `ParallelCorpus`)."""
    model, source_tokenizer, target_tokenizer, config, description = load_model(args)
    corpus = read_split(config.data, split, log=lambda *_: None)
    return model, source_tokenizer, target_tokenizer, config, description, corpus


def length_options(config):
    """The run's output length limits (of its `RunConfig`), as `Translator` takes them."""
    return {key: getattr(config.decode, key)
            for key in ("max_length_ratio", "max_length_offset")}


def length_sorted_batches(sentences, tokenizer, batch_size):
    """Index batches as `Translator` forms them: sorted by length, `batch_size` each."""
    lengths = [len(row) for row in tokenizer.tokenize(tf.constant(sentences)).to_list()]
    order = np.argsort(lengths, kind="stable")
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


# --------------------------------------------------------------------------
# (a) Throughput
# --------------------------------------------------------------------------
def throughput(args, model, source_tokenizer, target_tokenizer, config, sentences, references,
               log=print):
    export_dir = args.export_dir or tempfile.mkdtemp(prefix="decode-bench-")
    options = length_options(config)
    options["length_penalty"] = config.decode.length_penalty
    start = time.perf_counter()
    path = export_translator(model, source_tokenizer, target_tokenizer,
                             os.path.join(export_dir, "1"), beam_sizes=tuple(args.beam_list),
                             **options)
    export_seconds = time.perf_counter() - start
    loaded = tf.saved_model.load(path)
    signature = loaded.signatures["translate"]
    batches = length_sorted_batches(sentences, source_tokenizer, args.batch_size)
    translators = {k: Translator(model, source_tokenizer, target_tokenizer, beam_size=k,
                                 batch_size=args.batch_size, **options)
                   for k in args.beam_list}

    def saved_model_translate(k):
        outputs = [None] * len(sentences)
        for indices in batches:
            result = signature(
                sources=tf.constant([sentences[i] for i in indices]),
                beam_size=tf.constant([k]), length_penalty=tf.constant([-1.0]),
                num_hypotheses=tf.constant([1]), replace_unk=tf.constant([0]),
                sampling_topk=tf.constant([-1]), sampling_topp=tf.constant([-1.0]),
                sampling_temperature=tf.constant([-1.0]), seed=tf.constant([-1], tf.int64),
                with_alignments=tf.constant([-1]), eos_bias=tf.constant([float("nan")]),
                block_repeats=tf.constant([-1]), target_prefix=tf.constant([""]))
            for index, text in zip(indices, result["translations"].numpy()[:, 0]):
                outputs[index] = text.decode("utf-8")
        return outputs

    sampler = Translator(model, source_tokenizer, target_tokenizer, batch_size=args.batch_size,
                         sampling_topp=0.9, seed=1, **options)
    scorer = Scorer(model, source_tokenizer, target_tokenizer, batch_size=args.batch_size)
    runs = {}
    for k in args.beam_list:
        runs[f"translator/{k}"] = lambda k=k: translators[k].translate(sentences)
        runs[f"savedmodel/{k}"] = lambda k=k: saved_model_translate(k)
    runs["sampling/1"] = lambda: sampler.translate(sentences)
    runs["scoring/0"] = lambda: scorer.score(sentences, references)
    texts = {name: run() for name, run in runs.items()}  # untimed: tracing
    log(f"[a] exported in {export_seconds:.1f} s; warm-up done")

    def run_once(name):
        outputs = runs[name]()
        return len(outputs), None

    timings = interleaved(list(runs), run_once, args.repeats)
    rows = []
    for k in args.beam_list:
        translator_texts = texts[f"translator/{k}"]
        tokens = sum(len(row) for row in
                     target_tokenizer.tokenize(tf.constant(translator_texts)).to_list())
        identical = texts[f"savedmodel/{k}"] == translator_texts
        base = None
        for decoder in ("translator", "savedmodel"):
            timing = timings[f"{decoder}/{k}"]
            seconds = stats(timing["seconds"])
            median = seconds["median"]
            base = base or median
            rows.append({
                "decoder": decoder, "beam_size": k, "sentences": len(sentences),
                "target_tokens": tokens,
                "seconds": seconds, "cpu_seconds": stats(timing["cpu_seconds"]),
                "sentences_per_second": len(sentences) / median,
                "target_tokens_per_second": tokens / median,
                "speed_vs_translator": base / median,
                "same_strings_as_translator": identical,
            })
    for name in ("sampling/1", "scoring/0"):
        decoder, k = name.split("/")
        outputs = texts[name]
        tokens = (sum(result["tokens"] - 1 for result in outputs) if decoder == "scoring" else
                  sum(len(row) for row in
                      target_tokenizer.tokenize(tf.constant(outputs)).to_list()))
        seconds = stats(timings[name]["seconds"])
        median = seconds["median"]
        rows.append({
            "decoder": decoder, "beam_size": int(k), "sentences": len(sentences),
            "target_tokens": tokens, "seconds": seconds,
            "cpu_seconds": stats(timings[name]["cpu_seconds"]),
            "sentences_per_second": len(sentences) / median,
            "target_tokens_per_second": tokens / median,
            "speed_vs_translator": (stats(timings["translator/1"]["seconds"])["median"] / median
                                    if "translator/1" in timings else None),
            "same_strings_as_translator": None,
        })
    return {"rows": rows, "export_seconds": export_seconds, "export_path": path}


# --------------------------------------------------------------------------
# (b) Bookkeeping against the model step
# --------------------------------------------------------------------------
def bookkeeping(args, model, source_tokenizer, target_tokenizer, sentences):
    batch = sentences[:args.batch_size]
    pieces = source_tokenizer.tokenize(tf.constant(batch)).to_list()
    width = max(len(row) for row in pieces) + 1
    source_ids = np.full((len(batch), width), PAD_ID, np.int32)
    for row, ids in enumerate(pieces):
        source_ids[row, :len(ids) + 1] = ids + [data.EOS_ID]
    state = model.initial_decoding_state(tf.constant(source_ids),
                                         max_length=args.steps)  # encoder: not timed
    cache = model.head.inference_cache()
    real_step = model.make_step_fn(cache)
    vocab_size = target_tokenizer.vocab_size
    fixed = tf.nn.log_softmax(tf.random.stateless_normal([1, vocab_size], seed=[1, 2]))

    def trivial_step_for(k):
        # The same shapes as the model's step and no work at all: the scores
        # are one constant (batch * k, V) tensor made here, so the loop's time
        # is the search's own (top-k, gathers, pools, state reordering).
        scores = tf.tile(fixed, [len(batch) * k, 1])

        def trivial_step(ids_t, state):
            return scores, state
        return trivial_step

    steps = args.steps

    def make(step_fn, k):
        @tf.function
        def run(state):
            batch_size = len(batch)  # any model's state: LSTM or Transformer
            if k == 1:
                return greedy_search(step_fn, state, batch_size, steps, min_length=steps).ids
            return beam_search(step_fn, state, batch_size, k, steps, min_length=steps,
                               max_step_score=None).ids
        return run

    functions = {}
    for k in args.beam_list:
        functions[f"model/{k}"] = make(real_step, k)
        functions[f"trivial/{k}"] = make(trivial_step_for(k), k)
    for function in functions.values():
        function(state).numpy()  # tracing

    def run_once(name):
        functions[name](state).numpy()
        return steps, None

    timings = interleaved(list(functions), run_once, max(args.repeats, 3))
    rows = []
    for k in args.beam_list:
        real = stats(timings[f"model/{k}"]["seconds"])["median"]
        trivial = stats(timings[f"trivial/{k}"]["seconds"])["median"]
        rows.append({
            "beam_size": k, "batch_size": len(batch), "steps": steps,
            "ms_per_step_model": 1000 * real / steps,
            "ms_per_step_trivial": 1000 * trivial / steps,
            "bookkeeping_share": trivial / real,
            "model_step_share": max(0.0, 1.0 - trivial / real),
            "timings": {"model": timings[f"model/{k}"], "trivial": timings[f"trivial/{k}"]},
        })
    return {"rows": rows}


def print_tables(result):
    print(f"=== DECODING THROUGHPUT === ({result['model']}; {result['config']['sentences']} "
          f"dev sentences, batches of {result['config']['batch_size']}, CPU)")
    print(f"{'decoder':11s} {'beam':>4s} {'sent/s':>9s} {'tok/s':>9s} {'×transl.':>8s} "
          f"{'s (median)':>10s}  same strings")
    for row in result["throughput"]["rows"]:
        beam = str(row["beam_size"] or "-")
        ratio = row["speed_vs_translator"]
        ratio = "-" if ratio is None else f"{ratio:.2f}"
        same = row["same_strings_as_translator"]
        print(f"{row['decoder']:11s} {beam:>4s} {row['sentences_per_second']:>9.2f} "
              f"{row['target_tokens_per_second']:>9.1f} {ratio:>8s} "
              f"{row['seconds']['median']:>10.2f}  {'-' if same is None else same}")
    print("(sampling: the Translator, nucleus p = 0.9, ×transl. against its greedy; scoring: "
          "forced decoding of the references, tokens = their pieces)")
    print(f"(export took {result['throughput']['export_seconds']:.1f} s)")
    rows = result["bookkeeping"]["rows"]
    print(f"=== SEARCH BOOKKEEPING === (batch {rows[0]['batch_size']}, {rows[0]['steps']} steps, "
          f"EOS blocked; trivial step = constant log-probabilities, same shapes)")
    print(f"{'beam':>4s} {'model ms/step':>13s} {'trivial ms/step':>15s} {'bookkeeping':>11s} "
          f"{'model step':>10s}")
    for row in rows:
        print(f"{row['beam_size']:>4d} {row['ms_per_step_model']:>13.2f} "
              f"{row['ms_per_step_trivial']:>15.2f} {100 * row['bookkeeping_share']:>10.1f}% "
              f"{100 * row['model_step_share']:>9.1f}%")
    if result.get("caveat"):
        print(f"caveat: {result['caveat']}")


def main(args):
    started = time.perf_counter()
    info = machine_info()
    model, source_tokenizer, target_tokenizer, config, description, dev = (
        load_model_and_split(args))
    sentences = dev.sources[:args.sentences]
    args.sentences = len(sentences)
    result = {
        "model": description,
        "caveat": None if args.run_dir else UNTRAINED_CAVEAT,
        "throughput": throughput(args, model, source_tokenizer, target_tokenizer, config,
                                 sentences, dev.targets[:args.sentences]),
        "bookkeeping": bookkeeping(args, model, source_tokenizer, target_tokenizer, sentences),
    }
    args.beams = args.beam_list  # the JSON's config: the widths as a list
    record = write_record("decode", args, info, started, result, exclude=("beam_list",))
    print_tables(record)
    return record


if __name__ == "__main__":
    main(ARGS)

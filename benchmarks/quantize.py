"""int8 inference speed on this CPU: the products of a decoding step, and greedy decoding.

(a) Products. For the matrix shapes of one decoding step of `--preset` (rows:
    `--batch-size` sentences; the Transformer's attention projections, its
    feed-forward layers and the output layer; the LSTM's gate, attention and output
    products), the median milliseconds of one product by
    - `float32`: `tf.matmul` in float32 (oneDNN);
    - `int8`: `tf_outheads.ops.quantize.int8_matmul` (activations quantized per row,
      `tf.matmul(int8, int8, output_type=int32)`: what Keras' int8 `Dense` runs on
      TensorFlow), and the bare int8 product alone (`int8 product`);
    - `weight-only`: int8 weights turned back into float32 for a float product;
    - `onednn-u8s8`: `tf.raw_ops.QuantizedMatMulWithBiasAndDequantize`, oneDNN's
      uint8 × int8 kernel with float output (activations shifted to uint8).
(b) Greedy decoding. `Translator` on the first `--sentences` dev sentences, with the
    float model and with `tf_outheads.models.quantized_copy(model)` (int8: every
    Dense layer and the output layer), in turns (`--repeats` passes each): seconds,
    sentences/s, output pieces/s, and the share of outputs identical to the float
    model's (with `--run-dir`, also BLEU of both on `--split`, dev by default).

    python benchmarks/quantize.py --quick                           # smoke test
    python benchmarks/quantize.py --preset transformer-cpu          # untrained
    python benchmarks/quantize.py --run-dir runs/transformer-cpu    # a trained run

Model as in `benchmarks/decode.py` (`--run-dir`, or an untrained `--preset`).
Results go to `--output` (JSON, default benchmarks/results/quantize.json).
"""

import statistics
import time

from common import (  # benchmarks/ is the script's folder
    add_run_or_preset_arguments, benchmark_parser, interleaved, machine_info,
    parse_benchmark_args, start, stats, write_record,
)

QUICK = {"preset": "lstm-tiny", "vocab_size": 500, "tokenizer_sentences": 2000,
         "sentences": 8, "batch_size": 8, "repeats": 1, "product_repeats": 3}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    add_run_or_preset_arguments(parser, "transformer-cpu")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes per model")
    parser.add_argument("--split", default="dev", choices=["dev", "test"],
                        help="(b): the split translated")
    parser.add_argument("--product-repeats", type=int, default=50,
                        help="(a): timed calls per product and variant")
    return parse_benchmark_args(parser, argv, "quantize", QUICK, positive=(
        "sentences", "batch_size", "repeats", "product_repeats"))


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import sacrebleu  # noqa: E402
import tensorflow as tf  # noqa: E402

from decode import length_options, load_model_and_split  # noqa: E402
from tf_outheads.decoding import Translator  # noqa: E402
from tf_outheads.models import quantized_copy  # noqa: E402
from tf_outheads.ops.quantize import int8_matmul, quantize_int8  # noqa: E402

VARIANTS = ("float32", "int8", "int8 product", "weight-only", "onednn-u8s8")


def step_shapes(model, vocabulary):
    """`{name: (K, N)}`: the weight shapes a decoding step multiplies by."""
    shapes, dense = {}, set()
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dense):
            dense.add(id(layer.kernel))
            shapes.setdefault(f"dense {layer.kernel.shape[0]}x{layer.kernel.shape[1]}",
                              tuple(layer.kernel.shape))
    for weight in model.decoder.weights:  # the LSTM's own kernels (no Dense layers)
        if (len(weight.shape) == 2 and "embedding" not in weight.path
                and id(weight) not in dense):
            shapes.setdefault(f"{weight.path.split('/')[-1]} {weight.shape[0]}x"
                              f"{weight.shape[1]}", tuple(weight.shape))
    shapes[f"output {model.hidden_size}x{vocabulary}"] = (model.hidden_size, vocabulary)
    return shapes


def time_products(shapes, rows, repeats):
    rng = tf.random.Generator.from_seed(0)
    table = []
    for name, (k, n) in shapes.items():
        x = rng.normal([rows, k])
        w = rng.normal([k, n]) * 0.05
        q, scale = quantize_int8(w)
        x_q = tf.cast(tf.clip_by_value(tf.round(x * 40.0), -127, 127), tf.int8)
        x_u8 = tf.bitcast(tf.cast(tf.clip_by_value(tf.round(x * 40.0) + 128, 0, 255),
                                  tf.uint8), tf.quint8)
        q_s8 = tf.bitcast(q, tf.qint8)
        bias = tf.zeros([n])
        functions = {
            "float32": (tf.function(lambda x, w: tf.matmul(x, w)), (x, w)),
            "int8": (tf.function(lambda x, q, s: int8_matmul(x, q, s)), (x, q, scale)),
            "int8 product": (tf.function(
                lambda a, b: tf.matmul(a, b, output_type=tf.int32)), (x_q, q)),
            "weight-only": (tf.function(lambda x, q, s: int8_matmul(x, q, s, "float")),
                            (x, q, scale)),
            "onednn-u8s8": (tf.function(
                lambda a, b, bias=bias: tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
                    a=a, b=b, bias=bias, min_a=-3.2, max_a=3.2, min_b=-1.0, max_b=1.0,
                    min_freezed_output=-1e3, max_freezed_output=1e3, Toutput=tf.float32)),
                (x_u8, q_s8)),
        }
        row = {"product": name, "rows": rows, "k": k, "n": n}
        for variant, (function, arguments) in functions.items():
            try:
                function(*arguments)
            except (tf.errors.OpError, TypeError, ValueError) as error:
                row[variant] = None
                row[f"{variant} error"] = str(error).splitlines()[0][:200]
                continue
            times = []
            for _ in range(repeats):
                began = time.perf_counter()
                function(*arguments).numpy()
                times.append(time.perf_counter() - began)
            row[variant] = statistics.median(times) * 1e3
        table.append(row)
    return table


def greedy(args, model, source_tokenizer, target_tokenizer, config, sentences, references):
    options = length_options(config)
    quantized = quantized_copy(model)
    translators = {name: Translator(m, source_tokenizer, target_tokenizer,
                                    batch_size=args.batch_size, **options)
                   for name, m in (("float32", model), ("int8", quantized))}
    texts = {name: t.translate(sentences) for name, t in translators.items()}  # tracing
    timings = interleaved(list(translators),
                          lambda name: (len(translators[name].translate(sentences)), None),
                          args.repeats)
    rows = []
    for name, timing in timings.items():
        pieces = sum(len(row) for row in
                     target_tokenizer.tokenize(tf.constant(texts[name])).to_list())
        median = statistics.median(timing["seconds"])
        rows.append({
            "model": name, "sentences": len(sentences), "output_pieces": pieces,
            "seconds": stats(timing["seconds"]),
            "sentences_per_second": len(sentences) / median,
            "pieces_per_second": pieces / median,
            "identical_to_float": sum(a == b for a, b in zip(texts[name], texts["float32"]))
            / len(sentences),
            "bleu": (sacrebleu.corpus_bleu(texts[name], [references]).score
                         if args.run_dir else None),
        })
    return rows


def main(args):
    started = time.perf_counter()
    info = machine_info()
    model, source_tokenizer, target_tokenizer, config, description, split = (
        load_model_and_split(args, args.split))
    sentences, references = split.sources[:args.sentences], split.targets[:args.sentences]
    shapes = step_shapes(model, target_tokenizer.vocab_size)
    products = time_products(shapes, args.batch_size, args.product_repeats)
    print(f"\n(a) one product, {args.batch_size} rows, median ms ({description})")
    print(f"{'product':<34}" + "".join(f"{v:>14}" for v in VARIANTS))
    for row in products:
        print(f"{row['product']:<34}" + "".join(
            f"{row[v]:>14.3f}" if row[v] is not None else f"{'-':>14}" for v in VARIANTS))
    rows = greedy(args, model, source_tokenizer, target_tokenizer, config, sentences, references)
    print(f"\n(b) greedy Translator, {len(sentences)} {args.split} sentences, batches of "
          f"{args.batch_size}, {args.repeats} passes each")
    print(f"{'model':<10}{'s (median)':>12}{'sent/s':>10}{'pieces/s':>10}{'= float':>9}"
          f"{'BLEU':>10}")
    for row in rows:
        bleu = f"{row['bleu']:.2f}" if row["bleu"] is not None else "-"
        print(f"{row['model']:<10}{row['seconds']['median']:>12.3f}"
              f"{row['sentences_per_second']:>10.1f}{row['pieces_per_second']:>10.0f}"
              f"{row['identical_to_float']:>9.2f}{bleu:>10}")
    return write_record("quantize", args, info, started,
                        {"model": description, "products": products, "greedy": rows})


if __name__ == "__main__":
    main(ARGS)

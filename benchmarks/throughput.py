"""Training throughput of the zoo LSTM model against a plain hand-written Keras model.

Both models have the same architecture and the same number of parameters
(asserted): an LSTM encoder (`keras.layers.LSTM`), a decoder of
`keras.layers.LSTMCell`s with input feeding and Luong "general" attention run
as a `tf.while_loop` over time, and a softmax output layer (a `Dense`, or
weights tied to the target embedding with `--head tied`).

- "library": `tf_outheads_zoo.lstm.LSTMSeq2Seq` + `tf_outheads.MaskedSequenceCrossEntropy`.
- "plain":   `PlainSeq2Seq` below, written with `keras.layers` and `keras.ops`
  only (no `tf_outheads` import), + `keras.losses.SparseCategoricalCrossentropy(
  from_logits=True, ignore_class=PAD)`, the same masked per-token mean.

The plain model starts from a copy of the library model's weights, and the
script checks that both compute the same logits and loss on the first batch
before timing anything, so the two models really do the same computation.

Both are compiled the same way (Adam, optional XLA) and trained with
`train_on_batch` on the same list of batches: real Bible batches from
`tf_outheads.data.make_training_dataset` (SentencePiece trained on the train
split and cached in `--workdir`), or random ids of the same kind of shapes with
`--data synthetic`. After a warm-up pass over every batch (tracing, and XLA
compilation of every shape), each repeat times one pass over all the batches,
model after model, alternating the order (A B, B A, ...) so that load from
other processes hits both alike. Throughput is target tokens per second,
counting non-padding tokens of `target_out`; tokens per CPU-second (process
CPU time, all threads) is reported next to it, as it moves less with the
machine's load. The ratio is library / plain (1.0 = no overhead).

Optionally (`--decode-batches`, on by default) it also times greedy decoding
of dev-split sources: `tf_outheads.decoding.greedy_search` over the library's
step function against a hand-written greedy loop over the plain model, both
with the weights copied before training, in emitted tokens per second.

`--extra` times more variants in the same interleaved run, to find where a
difference comes from (e.g. `library+keras_loss`, `plain+library_loss`,
`plain+matmul_attention`, `plain+sliced_inputs`; see `VARIANTS`).

Run from the repository root:

    python benchmarks/throughput.py                      # defaults, ~3-5 min on 2 cores
    python benchmarks/throughput.py --data synthetic --steps 4 --repeats 3
    python benchmarks/throughput.py --extra library+keras_loss,plain+library_loss

Results go to `--output` (JSON, default benchmarks/results/throughput.json).
"""

import statistics
import time

from common import (  # benchmarks/ is the script's folder
    REPO_ROOT, add_decode_arguments, add_model_arguments, add_step_arguments, add_thread_arguments,
    benchmark_parser, check_args, corpus_batches, described_machine, interleaved,
    parse_benchmark_args, print_header, progress_printer, start, stats, warm_up, write_record,
)


# Variants that `--extra` can add. Each is (model kind, loss kind, plain model options).
VARIANTS = {
    "library": ("library", "library", {}),
    "plain": ("plain", "keras", {}),
    # The library model with Keras' own masked loss: isolates the loss.
    "library+keras_loss": ("library", "keras", {}),
    # The plain model with the library loss: isolates the model.
    "plain+library_loss": ("plain", "library", {}),
    # The library model with a masked cross-entropy written as log_softmax · one_hot.
    "library+onehot_loss": ("library", "onehot", {}),
    # Attention scores and context as batched matmuls instead of einsums.
    "plain+matmul_attention": ("plain", "keras", {"attention_impl": "matmul"}),
    # Per-step decoder inputs read as `xs[t]` (as the library does) instead of
    # from a TensorArray: the gradient of each slice is a full (T, B, E) tensor.
    "plain+sliced_inputs": ("plain", "keras", {"input_reads": "slice"}),
}


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, None)
    model = parser.add_argument_group("model")
    add_model_arguments(
        model, 256, 256, num_layers=1, dropout=0.3,
        jit_help="compile the train steps with XLA (compile(jit_compile=True))",
        helps={"dropout": "dropout of both models (LSTMSeq2Seq's default is 0.3)"})
    model.add_argument("--head", choices=["softmax", "tied"], default="softmax")
    data = parser.add_argument_group("data")
    data.add_argument("--data", choices=["real", "synthetic"], default="real",
                      help="real Bible batches, or random ids of realistic shapes")
    data.add_argument("--vocab-size", type=int, default=8000,
                      help="SentencePiece vocabulary (real) or vocabulary size (synthetic)")
    data.add_argument("--batch-tokens", type=int, default=4096,
                      help="padded tokens per batch (make_training_dataset's batch_tokens)")
    data.add_argument("--max-length", type=int, default=128,
                      help="longest example kept, in tokens (real data)")
    data.add_argument("--synthetic-length", type=int, default=44,
                      help="padded source and target length of synthetic batches")
    data.add_argument("--seed", type=int, default=0)
    data.add_argument("--workdir", default=str(REPO_ROOT / "benchmarks" / ".cache"),
                      help="where the SentencePiece model is trained and cached")
    timing = parser.add_argument_group("timing")
    add_step_arguments(timing, steps=8, repeats=5, calls="batches",
                       between="the models")
    add_decode_arguments(timing, batches=2, batches_help="dev batches to greedy-decode per repeat")
    timing.add_argument("--extra", default="",
                        help="comma-separated extra variants to time as well: "
                             + ", ".join(k for k in VARIANTS if k not in ("library", "plain")))
    add_thread_arguments(timing)
    args = parse_benchmark_args(parser, argv, "throughput", None, positive=(
        "embedding_dim", "hidden_dim", "num_layers", "vocab_size", "batch_tokens", "steps",
        "repeats", "decode_batch_size", "synthetic_length"))
    check_args(parser, args, dropout=True)
    extra = [name for name in args.extra.split(",") if name]
    unknown = [name for name in extra if name not in VARIANTS]
    if unknown:
        parser.error(f"unknown --extra variant(s) {unknown}; known: {sorted(VARIANTS)}")
    args.variants = ["library", "plain"] + [n for n in extra if n not in ("library", "plain")]
    return args


ARGS = start(parse_args, __name__)  # then TensorFlow: thread pools set, quiet logger, this checkout

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

PAD = 0  # tf_outheads.data.special_tokens: PAD 0, UNK 1, BOS 2, EOS 3
BOS = 2
EOS = 3


# --------------------------------------------------------------------------
# The plain model: what a careful user would write with Keras 3 and TF only.
# --------------------------------------------------------------------------
class PlainSeq2Seq(keras.Model):
    """LSTM encoder, attentional LSTM decoder with input feeding, softmax output.

    Args:
        attention_impl: "einsum" (default) or "matmul" for the two batched
            products of the attention.
        input_reads: "tensorarray" (default): the per-step decoder inputs are
            unstacked into a TensorArray; "slice": read as `xs[t]`.
    """

    def __init__(self, source_vocab, target_vocab, embedding_dim, hidden_dim, num_layers,
                 dropout=0.0, tied=False, attention_impl="einsum", input_reads="tensorarray",
                 **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.num_layers = num_layers
        self.rate = dropout
        self.tied = tied
        self.attention_impl = attention_impl
        self.input_reads = input_reads
        E, H = embedding_dim, hidden_dim
        self.source_embedding = keras.layers.Embedding(source_vocab, E, name="source_embedding")
        self.target_embedding = keras.layers.Embedding(target_vocab, E, name="target_embedding")
        self.dropout = keras.layers.Dropout(dropout)
        self.seed = keras.random.SeedGenerator(0)
        self.encoder_layers = [
            keras.layers.LSTM(H, return_sequences=True, return_state=True, name=f"encoder_{i}")
            for i in range(num_layers)
        ]
        self.decoder_cells = [keras.layers.LSTMCell(H, name=f"decoder_{i}") for i in range(num_layers)]
        self.source_embedding.build((None, None))
        self.target_embedding.build((None, None))
        for i, layer in enumerate(self.encoder_layers):
            layer.build((None, None, E if i == 0 else H))
        for i, cell in enumerate(self.decoder_cells):
            cell.build((None, E + H if i == 0 else H))
        self.attention_memory_kernel = self.add_weight(
            shape=(H, H), initializer="glorot_uniform", name="attention_memory_kernel")
        self.attention_output_kernel = self.add_weight(
            shape=(2 * H, H), initializer="glorot_uniform", name="attention_output_kernel")
        if tied:
            self.projection = None
            if H != E:
                self.projection = keras.layers.Dense(E, use_bias=False, name="projection")
                self.projection.build((None, None, H))
            self.output_bias = self.add_weight(shape=(target_vocab,), initializer="zeros",
                                               name="output_bias")
        else:
            self.output_layer = keras.layers.Dense(target_vocab, name="output")
            self.output_layer.build((None, None, H))
        self.built = True

    def encode(self, source_ids, training=False):
        mask = ops.not_equal(source_ids, PAD)
        x = self.dropout(self.source_embedding(source_ids), training=training)
        hs, cs = [], []
        for i, lstm in enumerate(self.encoder_layers):
            if i > 0:
                x = self.dropout(x, training=training)
            x, h, c = lstm(x, mask=mask, training=training)
            hs.append(h)
            cs.append(c)
        keys = ops.matmul(x, self.attention_memory_kernel)
        score_bias = (1.0 - ops.cast(mask, "float32")) * -1e9
        return (x, keys, score_bias), tuple(hs), tuple(cs)

    def attend(self, h, memory, keys, score_bias):
        if self.attention_impl == "matmul":
            scores = ops.squeeze(ops.matmul(keys, ops.expand_dims(h, -1)), -1)
        else:
            scores = ops.einsum("bh,bsh->bs", h, keys)
        weights = ops.softmax(scores + score_bias, axis=-1)
        if self.attention_impl == "matmul":
            context = ops.squeeze(ops.matmul(ops.expand_dims(weights, 1), memory), 1)
        else:
            context = ops.einsum("bs,bsh->bh", weights, memory)
        return ops.tanh(ops.matmul(ops.concatenate([context, h], -1), self.attention_output_kernel))

    def decoder_step(self, x, hs, cs, attentional, memory, noise_t=None):
        x = ops.concatenate([x, attentional], -1)
        new_hs, new_cs = [], []
        for i, cell in enumerate(self.decoder_cells):
            if i > 0 and noise_t is not None:
                x = x * noise_t[i - 1]
            x, (h, c) = cell(x, [hs[i], cs[i]])
            new_hs.append(h)
            new_cs.append(c)
        attentional = self.attend(x, *memory)
        if noise_t is not None:
            attentional = attentional * noise_t[-1]
        return attentional, tuple(new_hs), tuple(new_cs)

    def output_logits(self, h):
        if not self.tied:
            return self.output_layer(h)
        if self.projection is not None:
            h = self.projection(h)
        return ops.matmul(h, ops.transpose(self.target_embedding.embeddings)) + self.output_bias

    def call(self, inputs, training=False):
        memory, hs, cs = self.encode(inputs["source_ids"], training=training)
        embedded = self.target_embedding(inputs["target_in"])
        noise = None
        if training and self.rate > 0:
            embedded = self.dropout(embedded, training=True)
        xs = ops.transpose(embedded, (1, 0, 2))  # (T, B, E)
        steps, batch = tf.shape(xs)[0], tf.shape(xs)[1]
        if training and self.rate > 0:
            # One mask per step: between layers and on the attentional state.
            shape = (steps, self.num_layers, batch, self.hidden_dim)
            keep = keras.random.uniform(shape, seed=self.seed) >= self.rate
            noise = ops.cast(keep, xs.dtype) / (1.0 - self.rate)
        if self.input_reads == "tensorarray":
            xs_ta = tf.TensorArray(xs.dtype, size=steps).unstack(xs)
            read = xs_ta.read
        else:
            read = lambda t: xs[t]  # noqa: E731
        outputs = tf.TensorArray(xs.dtype, size=steps)
        attentional = ops.zeros((batch, self.hidden_dim), dtype=xs.dtype)

        def body(t, hs, cs, attentional, outputs):
            noise_t = noise[t] if noise is not None else None
            attentional, hs, cs = self.decoder_step(read(t), hs, cs, attentional, memory, noise_t)
            return t + 1, hs, cs, attentional, outputs.write(t, attentional)

        *_, outputs = tf.while_loop(
            lambda t, *_: t < steps, body, (tf.constant(0), hs, cs, attentional, outputs),
            maximum_iterations=steps,
        )
        h = ops.transpose(outputs.stack(), (1, 0, 2))  # (B, T, H)
        return self.output_logits(h)

    def greedy(self, source_ids, max_length):
        """Hand-written greedy search: emitted token counts `(B,)`."""
        memory, hs, cs = self.encode(source_ids)
        batch = tf.shape(source_ids)[0]
        ids = tf.fill([batch], BOS)
        attentional = tf.zeros((batch, self.hidden_dim))
        finished = tf.zeros([batch], tf.bool)
        lengths = tf.zeros([batch], tf.int32)

        def body(t, ids, hs, cs, attentional, finished, lengths):
            attentional, hs, cs = self.decoder_step(
                self.target_embedding(ids), hs, cs, attentional, memory)
            logits = self.output_logits(attentional)
            word = tf.argmax(logits, axis=-1, output_type=tf.int32)
            lengths += tf.cast(~finished, tf.int32)
            finished = finished | tf.equal(word, EOS) | (lengths >= max_length)
            ids = tf.where(finished, PAD, word)
            return t + 1, ids, hs, cs, attentional, finished, lengths

        *_, lengths = tf.while_loop(
            lambda t, ids, hs, cs, a, finished, lengths: ~tf.reduce_all(finished),
            body, (tf.constant(0), ids, hs, cs, attentional, finished, lengths),
            maximum_iterations=tf.reduce_max(max_length),
        )
        return lengths


# --------------------------------------------------------------------------
# Models, weights and the equivalence check
# --------------------------------------------------------------------------
def build_library_model(args, source_vocab, target_vocab):
    from tf_outheads_zoo.lstm import LSTMSeq2Seq

    return LSTMSeq2Seq(
        source_vocab, target_vocab, embedding_dim=args.embedding_dim,
        hidden_dim=args.hidden_dim, num_layers=args.num_layers, dropout=args.dropout,
        head=args.head,
    )


def build_plain_model(args, source_vocab, target_vocab, **options):
    return PlainSeq2Seq(
        source_vocab, target_vocab, args.embedding_dim, args.hidden_dim, args.num_layers,
        dropout=args.dropout, tied=args.head == "tied", **options,
    )


def copy_weights(library, plain):
    """Assigns the library model's weights to the plain model, one by one."""
    pairs = [
        (plain.source_embedding.embeddings, library.source_embedding.embeddings),
        (plain.target_embedding.embeddings, library.target_embedding.embeddings),
        (plain.attention_memory_kernel, library.decoder.attention.memory_kernel),
        (plain.attention_output_kernel, library.decoder.attention.output_kernel),
    ]
    for mine, theirs in zip(plain.encoder_layers, library.encoder.rnn_layers):
        pairs += [(getattr(mine.cell, n), getattr(theirs.cell, n))
                  for n in ("kernel", "recurrent_kernel", "bias")]
    for mine, theirs in zip(plain.decoder_cells, library.decoder.cells):
        pairs += [(getattr(mine, n), getattr(theirs, n)) for n in ("kernel", "recurrent_kernel", "bias")]
    if plain.tied:
        pairs.append((plain.output_bias, library.head.bias))
        if plain.projection is not None:
            pairs.append((plain.projection.kernel, library.head.projection_layer.kernel))
    else:
        pairs.append((plain.output_layer.kernel, ops.transpose(library.head.kernel)))
        pairs.append((plain.output_layer.bias, library.head.bias))
    assigned = {id(mine) for mine, _ in pairs}
    missing = [w.path for w in plain.trainable_weights if id(w) not in assigned]
    if missing or len(assigned) != len(pairs):
        raise AssertionError(f"weight mapping incomplete: unassigned {missing}")
    for mine, theirs in pairs:
        mine.assign(ops.convert_to_tensor(theirs))


def trainable_parameters(model):
    return int(sum(np.prod(w.shape) for w in model.trainable_weights))


class OneHotMaskedCrossEntropy(keras.losses.Loss):
    """Masked per-token cross-entropy as `-sum(log_softmax(logits) * one_hot(y))`.

    The same value as the other two losses; its gradient is dense elementwise
    work only (no gather, no scatter), which is cheaper on CPU.
    """

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)
        nll = -ops.sum(log_probs * ops.one_hot(y_true, ops.shape(y_pred)[-1]), axis=-1)
        mask = ops.cast(ops.not_equal(y_true, PAD), "float32")
        return ops.divide_no_nan(ops.sum(nll * mask), ops.sum(mask))


def make_loss(kind):
    if kind == "onehot":
        return OneHotMaskedCrossEntropy(reduction="sum")
    if kind == "library":
        from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy

        return MaskedSequenceCrossEntropy()
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=PAD)


def check_equivalence(library, plain, batch):
    """Same logits and loss on one batch (inference mode, identical weights)."""
    features, target_out = batch
    a = library(features, training=False)
    b = plain(features, training=False)
    logits_diff = float(ops.max(ops.abs(a - b)))
    loss_a = float(make_loss("library")(target_out, a))
    loss_b = float(make_loss("keras")(target_out, b))
    result = {"max_abs_logits_diff": logits_diff, "loss_library": loss_a, "loss_plain": loss_b}
    if not (logits_diff < 1e-3 and abs(loss_a - loss_b) < 1e-4 * max(1.0, abs(loss_a))):
        raise AssertionError(f"the two models do not compute the same function: {result}")
    return result


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
def synthetic_batches(args):
    rng = np.random.default_rng(args.seed)
    length, vocab = args.synthetic_length, args.vocab_size
    batch = max(1, args.batch_tokens // length)

    def ids(rows, lengths):
        out = np.zeros((rows, length), np.int32)
        for row, n in enumerate(lengths):
            out[row, :n] = rng.integers(4, vocab, n)
        return out

    batches = []
    for _ in range(args.steps):
        source_lengths = rng.integers(max(1, length // 2), length + 1, batch)
        source_lengths[0] = length
        source = ids(batch, source_lengths)
        source[np.arange(batch), source_lengths - 1] = EOS
        target_lengths = rng.integers(max(1, length // 2), length + 1, batch)
        target_lengths[0] = length
        target = ids(batch, target_lengths)  # words then EOS; BOS prepended for the input
        target[np.arange(batch), target_lengths - 1] = EOS
        target_in = np.where(target != 0, np.roll(target, 1, axis=1), 0).astype(np.int32)
        target_in[:, 0] = BOS
        batches.append(({"source_ids": tf.constant(source), "target_in": tf.constant(target_in)},
                        tf.constant(target)))
    decode = []
    for _ in range(args.decode_batches):
        lengths = rng.integers(max(1, length // 2), length + 1, args.decode_batch_size)
        source = ids(args.decode_batch_size, lengths)
        source[np.arange(len(lengths)), lengths - 1] = EOS
        decode.append(tf.constant(source))
    return batches, decode, vocab, vocab


# --------------------------------------------------------------------------
# Timing
# --------------------------------------------------------------------------
def decode_limits(source_ids):
    source_lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD), tf.int32), axis=1)
    # tf_outheads.decoding.max_length_from_source's default: ceil(1.5 * S) + 10.
    return tf.cast(tf.math.ceil(1.5 * tf.cast(source_lengths, tf.float32)), tf.int32) + 10


def make_decoder(kind, model):
    if kind == "plain":
        return tf.function(lambda src: model.greedy(src, decode_limits(src)), reduce_retracing=True)
    from tf_outheads.decoding import greedy_search

    def decode(src):
        limits = decode_limits(src)
        state = model.initial_decoding_state(src, max_length=tf.reduce_max(limits))
        result = greedy_search(model.make_step_fn(), state, tf.shape(src)[0], limits)
        return result.lengths

    return tf.function(decode, reduce_retracing=True)


def summarize(timing, **extra):
    """tokens/s (wall clock) and tokens per CPU-second, median/min/max over repeats, and
    `interleaved`'s timing (its units: tokens)."""
    timing = {"seconds": timing["seconds"], "cpu_seconds": timing["cpu_seconds"],
              "tokens": timing["units"]}
    rates = [t / s for t, s in zip(timing["tokens"], timing["seconds"])]
    cpu_rates = [t / s for t, s in zip(timing["tokens"], timing["cpu_seconds"])]
    return {**extra, "tokens_per_second": stats(rates), "tokens_per_cpu_second": stats(cpu_rates),
            **timing}


def ratios(table):
    """library / plain: ratio of the medians, and the median of the per-repeat ratios."""
    if "library" not in table or "plain" not in table:
        return None
    out = {}
    for metric in ("tokens_per_second", "tokens_per_cpu_second"):
        lib, base = table["library"][metric], table["plain"][metric]
        paired = [a / b for a, b in zip(lib["values"], base["values"])]
        out[metric] = {"ratio_of_medians": lib["median"] / base["median"],
                       "median_of_paired_ratios": statistics.median(paired), "paired": paired}
    return out


def print_table(title, rows, reference="plain"):
    print(f"\n{title}")
    header = (f"{'model':24s} {'params':>11s} {'tok/s median':>13s} {'min':>8s} {'max':>8s} "
              f"{'ratio':>6s} {'tok/CPU-s':>10s} {'ratio':>6s}")
    print_header(header)
    base = rows[reference]["tokens_per_second"]["median"]
    base_cpu = rows[reference]["tokens_per_cpu_second"]["median"]
    for name, row in rows.items():
        wall, cpu = row["tokens_per_second"], row["tokens_per_cpu_second"]
        print(f"{name:24s} {row['params']:>11,} {wall['median']:>13,.0f} {wall['min']:>8,.0f} "
              f"{wall['max']:>8,.0f} {wall['median'] / base:>6.3f} {cpu['median']:>10,.0f} "
              f"{cpu['median'] / base_cpu:>6.3f}")


def main(args):
    tf.random.set_seed(args.seed)
    keras.utils.set_random_seed(args.seed)
    machine = described_machine()

    started = time.perf_counter()
    if args.data == "real":
        batches, decode_sources, source_vocab, target_vocab = corpus_batches(args)
    else:
        batches, decode_sources, source_vocab, target_vocab = synthetic_batches(args)
    target_tokens = [int(tf.reduce_sum(tf.cast(y != PAD, tf.int32))) for _, y in batches]
    tokens_per_pass = sum(target_tokens)
    shapes = [[int(d) for d in x["source_ids"].shape] + [int(x["target_in"].shape[1])]
              for x, _ in batches]
    print(f"data: {args.data}, vocab {target_vocab}, {len(batches)} batches "
          f"(B, S, T) = {[tuple(s) for s in shapes]}, {tokens_per_pass} target tokens per pass "
          f"({time.perf_counter() - started:.1f} s)", flush=True)

    # Models: the library model first; every other one starts from its weights.
    library = build_library_model(args, source_vocab, target_vocab)
    models, losses = {}, {}
    for name in args.variants:
        kind, loss, options = VARIANTS[name]
        if kind == "library":
            model = library if name == "library" else build_library_model(args, source_vocab, target_vocab)
            if model is not library:
                model.set_weights(library.get_weights())
        else:
            model = build_plain_model(args, source_vocab, target_vocab, **options)
            copy_weights(library, model)
        models[name], losses[name] = model, loss
    params = {name: trainable_parameters(model) for name, model in models.items()}
    for name, count in params.items():
        assert count == params["library"], f"parameter counts differ: {params}"
    equivalence = check_equivalence(models["library"], models["plain"], batches[0])
    print(f"parameters: {params['library']:,} in both models; same logits on batch 0 "
          f"(max |diff| {equivalence['max_abs_logits_diff']:.2e}, loss {equivalence['loss_library']:.4f} "
          f"vs {equivalence['loss_plain']:.4f})", flush=True)

    results = {"train": {}, "decode": {}}
    progress = progress_printer("", lambda t: f"{t['units'][-1] / t['seconds'][-1]:,.0f} tok/s",
                                args.repeats, sep="  ")

    # Greedy decoding, before training changes the weights (same weights in all models).
    decode_names = [n for n in ("library", "plain") if args.decode_batches]
    if decode_names:
        decoders = {n: make_decoder(n, models[n]) for n in decode_names}
        print("\ngreedy decoding: warm-up", flush=True)
        emitted = {}
        for name in decode_names:
            emitted[name] = sum(int(tf.reduce_sum(decoders[name](src))) for src in decode_sources)

        def decode_once(name):
            return sum(int(tf.reduce_sum(decoders[name](src))) for src in decode_sources), None

        timings = interleaved(decode_names, decode_once, args.repeats, progress)
        for name in decode_names:
            results["decode"][name] = summarize(timings[name], params=params[name])

    # Training.
    for name, model in models.items():
        model.compile(optimizer=keras.optimizers.Adam(1e-3), loss=make_loss(losses[name]),
                      jit_compile=args.jit_compile)
    print("\ntraining: warm-up (tracing, one pass over the batches)", flush=True)
    warmup = warm_up(models, batches, len(batches))

    def train_once(name):
        for x, y in batches:
            models[name].train_on_batch(x, y)
        return tokens_per_pass, None

    timings = interleaved(list(models), train_once, args.repeats, progress)
    for name in models:
        results["train"][name] = summarize(
            timings[name], params=params[name], model=VARIANTS[name][0],
            loss=VARIANTS[name][1], options=VARIANTS[name][2], warmup_seconds=warmup[name])

    summary = {"train": ratios(results["train"]),
               "decode": ratios(results["decode"]) if results["decode"] else None}

    print_table("training: target (non-pad) tokens per second, train_on_batch after warm-up",
                results["train"])
    if results["decode"]:
        print_table("greedy decoding: emitted tokens per second", results["decode"])
    wall, cpu = summary["train"]["tokens_per_second"], summary["train"]["tokens_per_cpu_second"]
    print(f"\nlibrary / plain training throughput: {wall['ratio_of_medians']:.3f} "
          f"(median of paired repeats {wall['median_of_paired_ratios']:.3f}; per CPU-second "
          f"{cpu['ratio_of_medians']:.3f}); goal >= 0.95")

    return write_record("throughput", args, machine, started, {
        "data": {"kind": args.data, "source_vocab": source_vocab, "target_vocab": target_vocab,
                 "batch_shapes_BST": shapes, "target_tokens_per_batch": target_tokens,
                 "target_tokens_per_pass": tokens_per_pass,
                 "decode_sources": [[int(d) for d in s.shape] for s in decode_sources]},
        "equivalence_check": equivalence,
        "results": results,
        "ratios": summary,
    })


if __name__ == "__main__":
    main(ARGS)

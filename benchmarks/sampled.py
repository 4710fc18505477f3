"""Training step time of sampled softmax against the full softmax, per output head.

The shape of Pappas et al. (2018) Table 4 (target tokens per second in training
with 50%, 25% and 5% of the vocabulary sampled, |V| ≈ 128K), measured in one run
on this library's heads and `tf_outheads.SampledSoftmaxLoss` (`mode="batch"`:
one candidate set per batch, every distinct target word of the batch plus
uniform negatives, `K = ⌈p·|V|⌉` words in all, §3.2 of the paper).

Heads (`tf_outheads.layers.heads.build_head` specs, as `LSTMSeq2Seq(head=...)`):

- `softmax`: `SoftmaxHead`, the untied output layer (its own `(V, d_h)` weights
  and bias): the reference row of the paper's table;
- `tied`: `TiedSoftmaxHead`, the target embedding `E` `(V, d)` is the output
  weight matrix;
- `joint(512)`, `joint(2048)`, `joint(4096)`: `JointEmbeddingHead` (Eq. 15) with
  `d_j` from `--joint-dims`: `logits = σ(E·U + b_u) · σ(V·h + b_v) + b`.

Rows: `full` (the full softmax: `MaskedSequenceCrossEntropy()(y, head(h))`) and
one row per `--fractions` `p` (0.5, 0.25, 0.05:
`SampledSoftmaxLoss(fraction=p)` on `h` as a model's training step computes it), at each
`|V|` of `--vocab-sizes` (32000 and 128000), with `d = d_h = 512`.

1. Output layer + loss step (the main table). One `tf.function` (graph mode;
   XLA with `--jit-compile`, then the candidate set has a shape-only size) does,
   under a `tf.GradientTape`: the loss from decoder outputs `h` `(B, T, d_h)` and
   target ids `y` `(B, T)`, the gradients w.r.t. every trainable weight of the
   head -- for `tied` and `joint` that includes the target embedding `E`, which
   is their output weight matrix (for `softmax` the input embedding is not part
   of the output layer; it is in the whole-model table) -- and w.r.t. `h` (what
   backpropagates into the decoder), then applies them with the optimizer of
   `compile_for_translation` (Adam 1e-3, clipnorm 5; `--optimizer`,
   `--clipnorm`). The sampled step changes its candidates at every step (the
   optimizer's step count seeds the draw, as in `model.fit`). In a sampled
   step the gradients of `E` / of the softmax kernel and bias are
   `tf.IndexedSlices` over the `K` candidate rows. Keras 3's Adam does not
   update those rows only: its update (`m += (g − m)(1 − β1)`, ...) mixes the
   gradient with the dense slots, which turns it into a dense `(V, d)` tensor
   (`UnsortedSegmentSum` ops in the traced graph, with or without `clipnorm`),
   and `m`, `v` and the weights are then updated over all `|V|` rows (the
   moments of the other rows decay, as in dense training): no scatter. The script reads this off the traced
   graph (scatter ops against densifying ops; JSON `optimizer_update`) instead
   of assuming it, and it times the optimizer apply alone on the same
   gradients (column `opt ms`; per head, its rows interleaved, on the
   gradients of the first warm-up step) so that its share of a step can be seen.
   `--optimizer sgd --clipnorm 0` gives a sparse (scatter) update for
   comparison.

   Data: `--steps` fixed batches, cycled. `h` is uniform in [-1, 1] (the range of
   the tanh attentional state); `y` is drawn from a Zipfian (log-uniform)
   distribution over the word ids 4.. |V|-1, `P(rank r) = log((r+2)/(r+1)) /
   log(n+1)` (TensorFlow's log-uniform sampler; ids sorted by decreasing
   frequency, as SentencePiece's roughly are), with the last token of every
   sentence EOS, no padding. So batches repeat frequent words as real ones do:
   a 32 × 30 batch has about 570 distinct targets at |V| = 32K and 620 at
   128K (the JSON has the counts), against `K` = 1600 and 6400 at 5%;
   `--targets uniform` draws ids uniformly instead (about 920 distinct). When a batch has more distinct
   targets than `K`, the candidate set keeps them all (column `cand.`).

   Reported per configuration: ms per step (median of repeats), target tokens
   per second, the speed-up against the same head's full softmax, the ratio to
   the full-softmax untied head (the paper's reference: > 1 is faster), the
   same speed-up per process CPU-second, `ideal×` (the speed-up the
   multiply-add count alone predicts, below), and the optimizer apply alone.

2. Peak memory (`--memory`, default on). A process's resident-memory high-water
   mark cannot be reset, so each (head, |V|, row) is probed in a fresh child
   process (this script with a hidden `--probe`), run before the timings (the
   parent holds only TensorFlow then). The child imports TensorFlow, builds the
   head, the optimizer state and the traced step, then runs `--memory-steps`
   steps. Reported: `peak` = its `ru_maxrss` at the end minus its `ru_maxrss`
   after the imports (what the configuration adds to an idle TensorFlow
   process: weights, Adam slots and the step's temporaries), and `step` = the
   same `ru_maxrss` minus the resident size once everything is built (the
   working memory of one step; it includes a fixed cost of the first execution,
   thread pools and kernels, about 20 MiB here, which only matters at `--quick`
   sizes). CPU only: `tf.config.experimental.get_memory_info` does not exist
   for the CPU device. 40 children at the default sizes add roughly 5-10 min.

3. Whole LSTM model (`--model`, default on; `--model-heads`, default softmax,
   tied, joint(512); rows full, 25%, 5%, `--model-fractions`): `tf_outheads_zoo.lstm.
   LSTMSeq2Seq` (2 layers, 512, dropout 0.3, as `benchmarks/heads.py`) compiled
   with `compile_for_translation(model, loss=SampledSoftmaxLoss(fraction=p))`
   (or the default loss for `full`), `train_on_batch` steps per second on
   Zipfian batches of `--batch-size` × `--source-length` / `--target-length`.
   The models of one head (its rows) are built with the same seed and timed
   interleaved; heads run one after the other (all nine 128K models and their
   Adam state would not fit in memory together), so ratios across heads are
   less protected against load changes than speed-ups within a head. The
   source vocabulary is `|V|` too (`--source-vocab-size`; the paper's En→De uses
   a joint BPE vocabulary): its embedding's gradient is sparse and Adam
   densifies it as well, in every row alike.

Timing, as `benchmarks/heads.py`: after `--warmup-steps` untimed steps (tracing),
each repeat times `--steps` steps of every configuration of one `|V|`, the
configurations taking turns in an order that reverses on every repeat
(A B C ..., ... C B A) so that load from other processes hits all alike.
Medians over `--repeats`; wall clock and process CPU time (all threads); every
per-repeat timing goes to the JSON.

Expected costs (multiply-adds of one step; N = B·T target tokens, d_o the
output space: d, or d_j for joint; `K` candidates replace `|V|` when sampled):

- logits: N·|V|·d_o forward, twice that backward (into the weights and into h):
  3·N·|V|·d_o. At |V| = 128K, N = 960, d_o = 512 that is 1.9·10^11 (0.38 TFLOP).
- joint: E' = σ(E·U + b_u) for the scored rows, |V|·d·d_j forward and 2·|V|·d·d_j
  backward (U and E); sampled, only K rows are projected (K·d·d_j). Its h' =
  σ(V·h + b_v) is 3·N·d_h·d_j, the same in every row. For joint(4096) at 128K,
  full: E' 8.1·10^11 plus logits 1.5·10^12 multiply-adds, about 12× the untied
  head's step.
- not in `ideal×`: the softmax over N·K logits (and the one-hot target of
  `MaskedSequenceCrossEntropy`, N·|V| floats in the full rows), the candidate
  set (a top_k over a `(|V|,)` priority vector plus O(|V|) scatter/gather:
  linear in |V|, independent of p) and the dense Adam update of the `(V, d)`
  weights (several passes over |V|·d floats, independent of p). These bound
  the speed-up at small p: as p → 0 the step tends to the dense Adam update,
  not to zero.

Goals (the issue that asked for this benchmark), printed next to the numbers,
at |V| = `--goal-vocab` (128000): output-layer step ≥ 3× faster than the same
head's full softmax at 25% and ≥ 10× at 5%, checked and printed for every head;
joint(`--goal-joint-dim`, 4096) at 5% no slower than the full-softmax untied
head (ratio ≥ 1.0). With `--quick` the goals are printed at the largest quick
|V| for joint(128); those numbers are a smoke test, not a measurement. `--quick`
also skips the memory probes (`--quick --memory` runs them) and times the whole
model for joint(32) only, full and 5%, at |V| 2000.

Run from the repository root:

    python benchmarks/sampled.py --quick          # tiny sizes, a smoke test (< 1 min)
    python benchmarks/sampled.py                  # the full comparison (about 1 h on 2 cores)
    python benchmarks/sampled.py --vocab-sizes 128000 --no-model --no-memory

Results go to `--output` (JSON, default benchmarks/results/sampled.json).
"""

import argparse
import gc
import json
import math
import os
import pathlib
import re
import resource
import statistics
import subprocess
import sys
import time

from common import (  # benchmarks/ is the script's folder
    add_thread_arguments, benchmark_parser, interleaved, machine_info,
    parse_benchmark_args, setup, stats, write_record,
)

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

# `--quick`: every size small, one repeat. Options given explicitly still win.
QUICK = {
    "embedding_dim": 32,
    "hidden_dim": 32,
    "joint_dims": "32,64,128",  # d_j = d, 2·d, 4·d, as 512 / 2048 / 4096 are to d = 512 (roughly)
    "goal_joint_dim": 128,
    "vocab_sizes": "500,2000",
    "goal_vocab": 2000,
    "batch_size": 8,
    "target_length": 10,
    "source_length": 10,
    "num_layers": 1,
    "model_heads": "joint(32)",
    "model_fractions": "0.05",
    "model_vocab_sizes": "2000",
    "memory": False,  # 40 child processes; `--quick --memory` probes them anyway
    "warmup_steps": 1,
    "steps": 2,
    "repeats": 1,
}

SOFTMAX = "softmax"
FULL = "full"
SPEEDUP_GOALS = {0.25: 3.0, 0.05: 10.0}  # p → output-layer speed-up vs the head's own full softmax
JOINT_GOAL_FRACTION = 0.05
JOINT_GOAL = 1.0  # joint(4096) at 5% against softmax full: tokens/s ratio


def _int_list(text):
    return [int(value) for value in text.split(",") if value.strip()]


def _float_list(text):
    return [float(value) for value in text.split(",") if value.strip()]


def parse_args(argv=None):
    parser = benchmark_parser(__doc__, QUICK)
    heads = parser.add_argument_group("heads and sampling")
    heads.add_argument("--embedding-dim", type=int, default=512, help="d, the target embedding size")
    heads.add_argument("--hidden-dim", type=int, default=512, help="d_h, the decoder output size")
    heads.add_argument("--joint-dims", default="512,2048,4096",
                       help="comma-separated d_j of the joint heads")
    heads.add_argument("--fractions", default="0.5,0.25,0.05",
                       help="comma-separated sampling fractions p of the output-layer table "
                            "(the full softmax row is always timed)")
    heads.add_argument("--goal-vocab", type=int, default=128000,
                       help="the |V| at which the goals are checked")
    heads.add_argument("--goal-joint-dim", type=int, default=4096,
                       help="the joint head of the 'no slower than softmax full' goal")
    heads.add_argument("--jit-compile", action="store_true",
                       help="XLA-compile the steps (the candidate set then has a shape-only size)")
    optim = parser.add_argument_group("optimizer (compile_for_translation's by default)")
    optim.add_argument("--optimizer", choices=("adam", "lazy_adam", "sgd"), default="adam",
                       help="lazy_adam: tf_outheads.LazyAdam, sparse rows updated only")
    optim.add_argument("--learning-rate", type=float, default=1e-3)
    optim.add_argument("--clipnorm", type=float, default=5.0, help="per-variable clipnorm (0: none)")
    data = parser.add_argument_group("data (synthetic, fixed shape)")
    data.add_argument("--vocab-sizes", default="32000,128000",
                      help="comma-separated target vocabulary sizes |V|")
    data.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    data.add_argument("--target-length", type=int, default=30, help="target tokens per sentence")
    data.add_argument("--source-length", type=int, default=30,
                      help="source tokens per sentence (whole-model table)")
    data.add_argument("--source-vocab-size", type=int, default=0,
                      help="source vocabulary of the whole model (0: the same as each |V|)")
    data.add_argument("--targets", choices=("zipf", "uniform"), default="zipf",
                      help="distribution of the target ids (zipf: log-uniform over the ids)")
    data.add_argument("--seed", type=int, default=0)
    timing = parser.add_argument_group("timing")
    timing.add_argument("--warmup-steps", type=int, default=1,
                        help="untimed steps per configuration (tracing)")
    timing.add_argument("--steps", type=int, default=3,
                        help="steps per configuration and repeat")
    timing.add_argument("--repeats", type=int, default=3,
                        help="timed passes per configuration, interleaved")
    add_thread_arguments(timing)
    memory = parser.add_argument_group("peak memory")
    memory.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                        help="probe the peak memory of every configuration in a child process")
    memory.add_argument("--memory-steps", type=int, default=1,
                        help="steps each memory probe runs after building and tracing")
    memory.add_argument("--probe", default=None, help=argparse.SUPPRESS)
    model = parser.add_argument_group("whole LSTMSeq2Seq model")
    model.add_argument("--model", action=argparse.BooleanOptionalAction, default=True,
                       help="time train_on_batch of the whole model")
    model.add_argument("--model-heads", default="softmax,tied,joint(512)",
                       help="comma-separated heads: softmax, tied, joint(D) (or jointD)")
    model.add_argument("--model-fractions", default="0.25,0.05",
                       help="sampling fractions of the model table (plus the full softmax)")
    model.add_argument("--model-vocab-sizes", default="",
                       help="|V| of the model table (empty: --vocab-sizes)")
    model.add_argument("--num-layers", type=int, default=2)
    model.add_argument("--dropout", type=float, default=0.3)
    args = parse_benchmark_args(parser, argv, "sampled", QUICK, positive=(
        "embedding_dim", "hidden_dim", "batch_size", "target_length", "source_length",
        "steps", "repeats", "num_layers", "memory_steps"))
    for name in ("warmup_steps", "source_vocab_size", "clipnorm"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    if not 0.0 <= args.dropout < 1.0:
        parser.error("--dropout must be in [0, 1)")
    try:
        args.vocab_list = _int_list(args.vocab_sizes)
        args.joint_list = _int_list(args.joint_dims)
        args.fraction_list = _float_list(args.fractions)
        args.model_fraction_list = _float_list(args.model_fractions)
        args.model_vocab_list = _int_list(args.model_vocab_sizes) or list(args.vocab_list)
    except ValueError as error:
        parser.error(f"size and fraction lists are comma-separated numbers ({error})")
    if not args.vocab_list or min(args.vocab_list + args.model_vocab_list) < 8:
        parser.error("--vocab-sizes needs at least one size >= 8 (4 special ids plus words)")
    if args.joint_list and min(args.joint_list) < 1:
        parser.error("--joint-dims must be positive")
    for p in args.fraction_list + args.model_fraction_list:
        if not 0.0 < p < 1.0:
            parser.error(f"fractions must be in (0, 1) (the full softmax row is always there): {p}")
    args.model_head_list = [name.strip() for name in args.model_heads.split(",") if name.strip()]
    for name in args.model_head_list:
        if name not in (SOFTMAX, "tied") and not re.fullmatch(r"joint\(?\d+\)?", name):
            parser.error(f"--model-heads: unknown head {name!r} (softmax, tied, joint(D))")
    return args


ARGS = parse_args() if __name__ == "__main__" else None

setup(ARGS)  # before TensorFlow's first op: thread pools, quiet logger, this checkout on sys.path

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID  # noqa: E402
from tf_outheads.layers.heads import build_head  # noqa: E402
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy  # noqa: E402
from tf_outheads.losses.objective import Objective, StepOutputs  # noqa: E402
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss  # noqa: E402
from tf_outheads.ops import sampling  # noqa: E402
from tf_outheads.training.translation import compile_for_translation  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402

FIRST_WORD_ID = 4  # ids below are PAD, UNK, BOS, EOS
PROBE_TAG = "SAMPLED_PROBE "


# --------------------------------------------------------------------------
# Heads, rows and the analytic cost of a step
# --------------------------------------------------------------------------
def head_specs(joint_dims):
    """Display name → `build_head` / `LSTMSeq2Seq(head=...)` argument."""
    specs = {SOFTMAX: "softmax", "tied": "tied"}
    for joint_dim in joint_dims:
        specs[f"joint({joint_dim})"] = {"class_name": "joint", "config": {"joint_dim": joint_dim}}
    return specs


def model_head_spec(name):
    """`--model-heads` entry → (display name, spec)."""
    match = re.fullmatch(r"joint\(?(\d+)\)?", name)
    if match:
        joint_dim = int(match.group(1))
        return f"joint({joint_dim})", {"class_name": "joint", "config": {"joint_dim": joint_dim}}
    return name, name


def row_name(fraction):
    return FULL if fraction is None else f"{100 * fraction:g}%"


def joint_dim_of(spec):
    return spec["config"]["joint_dim"] if isinstance(spec, dict) else None


def candidate_count(fraction, vocab, targets, jit_compile):
    """Words scored by one step: |V|, or the size `batch_candidates` gives the set."""
    if fraction is None:
        return vocab
    k = sampling.num_candidates_for(fraction, vocab)
    if jit_compile:  # static_size: max(K, min(V, N))
        return min(vocab, max(k, targets.size))
    return max(k, len(np.unique(targets)))


def output_layer_macs(spec, scored, tokens, embedding_dim, hidden_dim):
    """Multiply-adds of one output-layer step (forward and backward) scoring `scored` words.

    3·N·scored·d_o for the logits (forward, into the weights, into h); a joint
    head adds 3·scored·d·d_j for E' (forward, into U, into E) and 3·N·d_h·d_j for
    h'; a tied head with d_h != d adds its projection 3·N·d_h·d.
    """
    joint_dim = joint_dim_of(spec)
    if joint_dim is not None:
        return (3 * tokens * scored * joint_dim + 3 * scored * embedding_dim * joint_dim
                + 3 * tokens * hidden_dim * joint_dim)
    if spec == "softmax":
        return 3 * tokens * scored * hidden_dim
    macs = 3 * tokens * scored * embedding_dim
    if hidden_dim != embedding_dim:
        macs += 3 * tokens * hidden_dim * embedding_dim
    return macs


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------
def target_ids(rng, rows, length, vocab, distribution):
    """`(rows, length)` int32 word ids (Zipfian or uniform), the last one EOS: no padding."""
    words = vocab - FIRST_WORD_ID
    if distribution == "zipf":
        # Log-uniform: P(r) = log((r + 2) / (r + 1)) / log(words + 1), inverse CDF.
        u = rng.random((rows, length))
        ranks = np.floor(np.exp(u * math.log(words + 1.0))) - 1.0
        ranks = np.clip(ranks, 0, words - 1)
    else:
        ranks = rng.integers(0, words, (rows, length))
    ids = (FIRST_WORD_ID + ranks).astype(np.int32)
    ids[:, -1] = EOS_ID
    return ids


def output_layer_batches(args, vocab):
    """`--steps` pairs `(h (B, T, d_h) float32, y (B, T) int32)`, the same in every run."""
    rng = np.random.default_rng([args.seed, vocab])
    batches = []
    for _ in range(args.steps):
        h = rng.uniform(-1.0, 1.0, (args.batch_size, args.target_length, args.hidden_dim))
        y = target_ids(rng, args.batch_size, args.target_length, vocab, args.targets)
        batches.append((tf.constant(h.astype(np.float32)), tf.constant(y)))
    return batches


def model_batches(args, source_vocab, target_vocab):
    rng = np.random.default_rng([args.seed, target_vocab, 1])
    batches = []
    for _ in range(args.steps):
        source = target_ids(rng, args.batch_size, args.source_length, source_vocab, args.targets)
        target_out = target_ids(rng, args.batch_size, args.target_length, target_vocab,
                                args.targets)
        target_in = np.concatenate(
            [np.full((args.batch_size, 1), BOS_ID, np.int32), target_out[:, :-1]], axis=1)
        batches.append(({"source_ids": tf.constant(source), "target_in": tf.constant(target_in)},
                        tf.constant(target_out)))
    return batches


# --------------------------------------------------------------------------
# The output layer + loss step
# --------------------------------------------------------------------------
def make_optimizer(args):
    clipnorm = args.clipnorm or None
    if args.optimizer == "sgd":
        return keras.optimizers.SGD(learning_rate=args.learning_rate, clipnorm=clipnorm)
    if args.optimizer == "lazy_adam":
        from tf_outheads import LazyAdam

        return LazyAdam(learning_rate=args.learning_rate, clipnorm=clipnorm)
    return keras.optimizers.Adam(learning_rate=args.learning_rate, clipnorm=clipnorm)


def build_output_head(args, spec, vocab):
    """A head on its own target embedding `(V, d)` (initialized as LSTMSeq2Seq's), built."""
    keras.utils.set_random_seed(args.seed)  # every head starts from the same E
    embedding = keras.layers.Embedding(vocab, args.embedding_dim,
                                       embeddings_initializer="uniform", name="target_embedding")
    embedding.build((None,))
    head = build_head(spec, vocab, embedding)
    head.build((None, None, args.hidden_dim))
    if getattr(head, "uses_target_embedding", False):
        paths = [id(w) for w in head.trainable_weights]
        assert id(embedding.embeddings) in paths, "the head's weights must include E"
    return head


class OutputStep:
    """The compiled functions of one (head, row): the train step and the optimizer apply alone."""

    def __init__(self, args, head, optimizer, fraction):
        self.head, self.optimizer, self.fraction = head, optimizer, fraction
        self.variables = list(head.trainable_weights)
        self.full_loss = MaskedSequenceCrossEntropy()
        self.sampled_loss = (None if fraction is None
                             else SampledSoftmaxLoss(fraction=fraction, seed=args.seed))
        self.objective = (None if fraction is None
                          else Objective(self.sampled_loss, None, {"logits": self.head}))
        self.static_size = bool(args.jit_compile)
        self.gradient_types = {}
        jit = bool(args.jit_compile)
        self.train_step = tf.function(self._train_step, jit_compile=jit)
        self.apply_only = tf.function(self._apply_only, jit_compile=jit)

    def _loss_and_gradients(self, h, y):
        with tf.GradientTape() as tape:
            tape.watch(h)
            if self.sampled_loss is None:
                loss = self.full_loss(y, self.head(h))
            else:
                # As a model's training step: the optimizer step seeds the draw.
                outputs = StepOutputs(h, self.head, step=self.optimizer.iterations,
                                      static_size=self.static_size)
                total, tokens = self.objective(y, outputs)
                loss = total / tokens
        grads = tape.gradient(loss, self.variables + [h])
        # Recorded while tracing: which gradients are sparse.
        self.gradient_types = {
            getattr(v, "path", v.name): type(g).__name__
            for v, g in zip(self.variables, grads[:-1])}
        return loss, grads[:-1], grads[-1]

    def _train_step(self, h, y):
        loss, grads, grad_h = self._loss_and_gradients(h, y)
        self.optimizer.apply(grads, self.variables)
        # Returning dL/dh keeps its computation in the graph (a decoder needs
        # it); the gradients are returned for the apply-alone timing (they are
        # alive until the apply anyway; callers drop them at once).
        return loss, grad_h, grads

    def _apply_only(self, grads):
        self.optimizer.apply(grads, self.variables)
        return self.optimizer.iterations.value

    def update_ops(self, h, y):
        """Op counts of the traced train step that tell a sparse from a dense update."""
        graph_def = self.train_step.get_concrete_function(h, y).graph.as_graph_def()
        counts = {}
        nodes = list(graph_def.node)
        for function in graph_def.library.function:
            nodes.extend(function.node_def)
        for node in nodes:
            counts[node.op] = counts.get(node.op, 0) + 1
        scatter = sum(n for op, n in counts.items() if "Scatter" in op and op != "TensorScatterUpdate")
        return {
            "gradient_types": dict(self.gradient_types),
            "scatter_update_ops": scatter,
            "densifying_ops (UnsortedSegmentSum)": counts.get("UnsortedSegmentSum", 0),
            "variable_assign_ops": sum(n for op, n in counts.items()
                                       if op in ("AssignAddVariableOp", "AssignSubVariableOp",
                                                 "AssignVariableOp")),
        }


# --------------------------------------------------------------------------
# Memory probes: one child process per configuration
# --------------------------------------------------------------------------
def rss_kb():
    """Current resident set size of this process, in KiB (Linux), else the high-water mark."""
    try:
        with open("/proc/self/status", encoding="ascii") as stream:
            for line in stream:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return max_rss_kb()


def max_rss_kb():
    """`ru_maxrss` of this process in KiB (Linux reports KiB, macOS bytes)."""
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value // 1024 if sys.platform == "darwin" else value


def run_probe(args):
    """Child side: build one configuration, run it, print its memory as one JSON line."""
    import_maxrss = max_rss_kb()
    spec_of = json.loads(args.probe)
    name, vocab, fraction = spec_of["head"], spec_of["vocab"], spec_of["fraction"]
    spec = head_specs(args.joint_list)[name]
    h, y = output_layer_batches(args, vocab)[0]
    head = build_output_head(args, spec, vocab)
    optimizer = make_optimizer(args)
    optimizer.build(head.trainable_weights)
    step = OutputStep(args, head, optimizer, fraction)
    step.train_step.get_concrete_function(h, y)  # traced, not run
    gc.collect()
    built_rss, built_maxrss = rss_kb(), max_rss_kb()
    for _ in range(args.memory_steps):
        loss = step.train_step(h, y)[0]
    float(loss)
    peak = max_rss_kb()
    print(PROBE_TAG + json.dumps({
        "head": name, "vocab": vocab, "fraction": fraction,
        "import_maxrss_kb": import_maxrss, "built_rss_kb": built_rss,
        "built_maxrss_kb": built_maxrss, "peak_maxrss_kb": peak,
    }), flush=True)


def probe_command(args, name, vocab, fraction):
    spec = json.dumps({"head": name, "vocab": vocab, "fraction": fraction})
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--probe", spec,
               "--embedding-dim", str(args.embedding_dim), "--hidden-dim", str(args.hidden_dim),
               "--joint-dims", args.joint_dims, "--vocab-sizes", str(vocab),
               "--batch-size", str(args.batch_size), "--target-length", str(args.target_length),
               "--steps", "1", "--targets", args.targets, "--seed", str(args.seed),
               "--optimizer", args.optimizer, "--learning-rate", str(args.learning_rate),
               "--clipnorm", str(args.clipnorm), "--memory-steps", str(args.memory_steps),
               "--intra-op-threads", str(args.intra_op_threads),
               "--inter-op-threads", str(args.inter_op_threads)]
    if args.jit_compile:
        command.append("--jit-compile")
    return command


def run_memory(args, specs):
    """Parent side: every (|V|, head, row) in a fresh child; MiB above its own baselines."""
    fractions = [None] + args.fraction_list
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    results = {}
    print(f"\npeak memory: one child process per configuration ({args.memory_steps} step(s) each)",
          flush=True)
    for vocab in args.vocab_list:
        rows = []
        for name in specs:
            for fraction in fractions:
                start = time.perf_counter()
                completed = subprocess.run(probe_command(args, name, vocab, fraction), env=env,
                                           capture_output=True, text=True, check=False)
                seconds = time.perf_counter() - start
                row = {"head": name, "vocab": vocab, "row": row_name(fraction),
                       "fraction": fraction, "child_seconds": seconds,
                       "returncode": completed.returncode}
                lines = [line for line in completed.stdout.splitlines()
                         if line.startswith(PROBE_TAG)]
                if completed.returncode == 0 and lines:
                    probe = json.loads(lines[-1][len(PROBE_TAG):])
                    row.update(probe)
                    row["peak_mib"] = (probe["peak_maxrss_kb"] - probe["import_maxrss_kb"]) / 1024
                    row["step_mib"] = (probe["peak_maxrss_kb"] - probe["built_rss_kb"]) / 1024
                    print(f"  |V| {vocab:,} {name} {row_name(fraction)}: peak {row['peak_mib']:,.0f} "
                          f"MiB, step {row['step_mib']:,.0f} MiB ({seconds:.0f} s)", flush=True)
                else:
                    row["error"] = completed.stderr[-2000:]
                    print(f"  |V| {vocab:,} {name} {row_name(fraction)}: FAILED "
                          f"(exit {completed.returncode}); stderr tail in the JSON", flush=True)
                rows.append(row)
        results[str(vocab)] = {"rows": rows}
    return results


# --------------------------------------------------------------------------
# Summaries
# --------------------------------------------------------------------------
def ms_per_step(timing):
    return ([1000 * s / u for s, u in zip(timing["seconds"], timing["units"])],
            [1000 * s / u for s, u in zip(timing["cpu_seconds"], timing["units"])])


def speedup(timing, reference):
    """Reference time / this time (> 1: faster), wall and CPU."""
    wall, cpu = ms_per_step(timing)
    ref_wall, ref_cpu = ms_per_step(reference)
    return {
        "ratio_of_medians": statistics.median(ref_wall) / statistics.median(wall),
        "median_of_paired_ratios": statistics.median(r / w for r, w in zip(ref_wall, wall)),
        "cpu_ratio_of_medians": statistics.median(ref_cpu) / statistics.median(cpu),
    }


def ratio_cell(value):
    return "-" if value is None else f"{value:.2f}"


def goal_text(value, goal):
    return f">= {goal:g} {'met' if value >= goal else 'MISSED'}"


def fmt_ms(ms):
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 1 else f"{ms:.2f}"


def progress_line(unit):
    def progress(repeat, order, timings):
        parts = [f"{name} {fmt_ms(1000 * timings[name]['seconds'][-1] / timings[name]['units'][-1])}"
                 for name in order]
        print(f"  repeat {repeat + 1}: ms/{unit}: " + ", ".join(parts), flush=True)
    return progress


# --------------------------------------------------------------------------
# One vocabulary size, output layer + loss
# --------------------------------------------------------------------------
def run_output_layer(args, vocab, specs):
    batches = output_layer_batches(args, vocab)
    tokens = args.batch_size * args.target_length  # no padding
    fractions = [None] + args.fraction_list
    distinct = [int(len(np.unique(y.numpy()))) for _, y in batches]
    print(f"\n=== output layer + loss, |V| = {vocab:,}: h {args.batch_size} × "
          f"{args.target_length} × {args.hidden_dim}, d = {args.embedding_dim}, {args.targets} "
          f"targets ({statistics.mean(distinct):.0f} distinct per batch on average) ===",
          flush=True)

    steps, configs = {}, {}
    for name, spec in specs.items():
        start = time.perf_counter()
        head = build_output_head(args, spec, vocab)
        optimizer = make_optimizer(args)
        optimizer.build(head.trainable_weights)
        params = sum(math.prod(w.shape) for w in head.trainable_weights)
        for fraction in fractions:
            key = f"{name} {row_name(fraction)}"
            steps[key] = OutputStep(args, head, optimizer, fraction)
            scored = statistics.mean(candidate_count(fraction, vocab, y.numpy(), args.jit_compile)
                                     for _, y in batches)
            configs[key] = {"head": name, "vocab": vocab, "row": row_name(fraction),
                            "fraction": fraction, "candidates_mean": scored,
                            "head_trainable_parameters": params,
                            "macs": output_layer_macs(spec, scored, tokens, args.embedding_dim,
                                                      args.hidden_dim)}
        print(f"  built {name}: {params:,} trainable weights incl. E for tied/joint "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    names = list(steps)

    # Per head: warm-up (tracing) of its rows, then the optimizer apply alone,
    # timed on the gradients of the first warm-up step (the rows of the head
    # interleaved); those gradients are dropped before the next head (at 128K a
    # full row's dense (V, d) gradient is 262 MB).
    def apply_once(key):
        iterations = None
        for _ in batches:
            iterations = steps[key].apply_only(sample_grads[key])
        int(iterations)
        return len(batches), None

    print(f"warm-up (tracing; {args.warmup_steps} step(s)), then the optimizer apply alone on "
          "the gradients of a step", flush=True)
    update, apply = {}, {}
    for name in specs:
        keys = [f"{name} {row_name(fraction)}" for fraction in fractions]
        sample_grads, line = {}, []
        for key in keys:
            start = time.perf_counter()
            h, y = batches[0]
            sample_grads[key] = steps[key].train_step(h, y)[2]  # traced here
            for index in range(1, args.warmup_steps):
                h, y = batches[index % len(batches)]
                float(steps[key].train_step(h, y)[0])
            update[key] = steps[key].update_ops(h, y)
            steps[key].apply_only(sample_grads[key])  # traced here
            configs[key]["warmup_seconds"] = time.perf_counter() - start
            line.append(f"{configs[key]['row']} {configs[key]['warmup_seconds']:.1f} s")
        print(f"  {name} warm-up: " + ", ".join(line), flush=True)
        apply.update(interleaved(keys, apply_once, args.repeats, progress_line("apply")))
        del sample_grads

    def train_once(key):
        loss = None
        for h, y in batches:
            loss = steps[key].train_step(h, y)[0]
        return len(batches), {"last_loss": float(loss)}

    print("output layer + loss + optimizer step, every configuration interleaved", flush=True)
    train = interleaved(names, train_once, args.repeats, progress_line("step"))

    rows = []
    for key in names:
        row = dict(configs[key])
        name = row["head"]
        wall, cpu = ms_per_step(train[key])
        apply_wall, _ = ms_per_step(apply[key])
        own_full = f"{name} {FULL}"
        row.update(
            ms_per_step=stats(wall), cpu_ms_per_step=stats(cpu),
            tokens_per_second_median=tokens * 1000 / statistics.median(wall),
            optimizer_apply_ms=stats(apply_wall),
            speedup_vs_own_full=speedup(train[key], train[own_full]),
            ratio_to_softmax_full=(speedup(train[key], train[f"{SOFTMAX} {FULL}"])
                                   if SOFTMAX in specs else None),
            ideal_speedup_from_macs=configs[own_full]["macs"] / row["macs"],
            optimizer_update=update[key],
            timings=train[key], apply_timings=apply[key])
        rows.append(row)
    result = {"vocab": vocab, "tokens_per_step": tokens, "distinct_targets_per_batch": distinct,
              "rows": rows}
    print_output_table(args, result)
    del steps
    gc.collect()
    keras.backend.clear_session()
    return result


def output_goal_cell(args, row):
    if row["vocab"] != args.goal_vocab:
        return ""
    cells = []
    goal = SPEEDUP_GOALS.get(row["fraction"])
    if goal is not None:
        cells.append(f"×own {goal_text(row['speedup_vs_own_full']['ratio_of_medians'], goal)}")
    if (row["head"] == f"joint({args.goal_joint_dim})" and row["fraction"] == JOINT_GOAL_FRACTION
            and row["ratio_to_softmax_full"] is not None):
        cells.append(f"×softmax {goal_text(row['ratio_to_softmax_full']['ratio_of_medians'], JOINT_GOAL)}")
    return "; ".join(cells)


def print_output_table(args, result):
    print(f"\noutput layer + loss + {args.optimizer} step, |V| = {result['vocab']:,}, "
          f"{result['tokens_per_step']} target tokens per step: median of {args.repeats} "
          f"repeat(s) × {args.steps} steps")
    header = (f"{'head':12s} {'row':>5s} {'cand.':>7s} {'ms/step':>9s} {'tok/s':>9s} "
              f"{'×own full':>9s} {'×softmax':>8s} {'×own CPU':>8s} {'ideal×':>7s} "
              f"{'opt ms':>7s}  goal")
    print(header)
    print("-" * (len(header) + 24))
    for row in result["rows"]:
        to_softmax = row["ratio_to_softmax_full"]
        print(f"{row['head']:12s} {row['row']:>5s} {row['candidates_mean']:>7,.0f} "
              f"{fmt_ms(row['ms_per_step']['median']):>9s} {row['tokens_per_second_median']:>9,.0f} "
              f"{row['speedup_vs_own_full']['ratio_of_medians']:>9.2f} "
              f"{ratio_cell(to_softmax and to_softmax['ratio_of_medians']):>8s} "
              f"{row['speedup_vs_own_full']['cpu_ratio_of_medians']:>8.2f} "
              f"{row['ideal_speedup_from_macs']:>7.1f} "
              f"{fmt_ms(row['optimizer_apply_ms']['median']):>7s}  {output_goal_cell(args, row)}")
    print("(×own full: speed-up against the head's full softmax; ×softmax: against the untied "
          "head's full softmax; ideal×: multiply-adds of own full / this row; opt ms: the "
          "optimizer apply alone on this step's gradients)", flush=True)


def print_memory_table(memory):
    for vocab, result in memory.items():
        print(f"\npeak memory, |V| = {int(vocab):,} (child process per configuration; MiB)")
        header = f"{'head':12s} {'row':>5s} {'peak':>9s} {'step':>9s} {'×own full':>9s}"
        print(header)
        print("-" * len(header))
        full = {r["head"]: r.get("peak_mib") for r in result["rows"] if r["row"] == FULL}
        for row in result["rows"]:
            if "peak_mib" not in row:
                print(f"{row['head']:12s} {row['row']:>5s}   failed (exit {row['returncode']})")
                continue
            ratio = row["peak_mib"] / full[row["head"]] if full.get(row["head"]) else None
            print(f"{row['head']:12s} {row['row']:>5s} {row['peak_mib']:>9,.1f} "
                  f"{row['step_mib']:>9,.1f} {ratio_cell(ratio):>9s}")
    print("(peak: child's ru_maxrss minus its ru_maxrss after importing TensorFlow = weights, "
          "optimizer slots and the step; step: minus its resident size once built)", flush=True)


# --------------------------------------------------------------------------
# Whole model
# --------------------------------------------------------------------------
def build_model(args, source_vocab, target_vocab, spec, fraction):
    keras.utils.set_random_seed(args.seed)  # the rows of one head start equal
    model = LSTMSeq2Seq(source_vocab, target_vocab, embedding_dim=args.embedding_dim,
                        hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                        dropout=args.dropout, head=spec)
    loss = None if fraction is None else SampledSoftmaxLoss(fraction=fraction, seed=args.seed)
    # The optimizer of the output-layer table: compile_for_translation's by default.
    compile_for_translation(model, optimizer=make_optimizer(args), loss=loss,
                            jit_compile=args.jit_compile)
    return model


def run_model(args, vocab):
    source_vocab = args.source_vocab_size or vocab
    batches = model_batches(args, source_vocab, vocab)
    tokens = args.batch_size * args.target_length
    fractions = [None] + args.model_fraction_list
    print(f"\n=== whole LSTMSeq2Seq, |V| = {vocab:,} (source {source_vocab:,}): "
          f"{args.num_layers} × {args.hidden_dim}, batch {args.batch_size} × "
          f"{args.source_length} / {args.target_length} ===", flush=True)
    rows = []
    for head_name in args.model_head_list:
        name, spec = model_head_spec(head_name)
        models = {}
        start = time.perf_counter()
        for fraction in fractions:
            models[f"{name} {row_name(fraction)}"] = build_model(
                args, source_vocab, vocab, spec, fraction)
        print(f"  built {', '.join(models)}: {time.perf_counter() - start:.1f} s", flush=True)
        # Warm up only once every model is built: building one (it reseeds
        # TensorFlow) made the next call of an already warmed-up model slow again.
        for key, model in models.items():
            start = time.perf_counter()
            for index in range(args.warmup_steps):
                features, target_out = batches[index % len(batches)]
                model.train_on_batch(features, target_out)
            print(f"  warm-up {key}: {time.perf_counter() - start:.1f} s", flush=True)

        def train_once(key):
            loss = None
            for features, target_out in batches:
                loss = models[key].train_on_batch(features, target_out)
            return len(batches), {"last_loss": float(np.ravel(loss)[0])}

        timings = interleaved(list(models), train_once, args.repeats, progress_line("step"))
        full_key = f"{name} {FULL}"
        for key, timing in timings.items():
            wall, cpu = ms_per_step(timing)
            fraction = fractions[list(models).index(key)]
            rows.append({
                "head": name, "vocab": vocab, "row": row_name(fraction), "fraction": fraction,
                "ms_per_step": stats(wall), "cpu_ms_per_step": stats(cpu),
                "steps_per_second_median": 1000 / statistics.median(wall),
                "tokens_per_second_median": tokens * 1000 / statistics.median(wall),
                "speedup_vs_own_full": speedup(timing, timings[full_key]),
                "timings": timing,
            })
        del models
        gc.collect()
        keras.backend.clear_session()
    reference = next((r for r in rows if r["head"] == SOFTMAX and r["row"] == FULL), None)
    for row in rows:
        # Not interleaved across heads: the heads ran one after the other.
        row["ratio_to_softmax_full"] = (
            reference["ms_per_step"]["median"] / row["ms_per_step"]["median"]
            if reference else None)
    result = {"vocab": vocab, "source_vocab": source_vocab, "tokens_per_step": tokens, "rows": rows}
    print(f"\nwhole model, |V| = {vocab:,}: train_on_batch, median of {args.repeats} repeat(s) "
          f"× {args.steps} steps")
    header = (f"{'head':12s} {'row':>5s} {'ms/step':>9s} {'steps/s':>8s} {'tok/s':>8s} "
              f"{'×own full':>9s} {'×own CPU':>8s} {'×softmax':>8s}")
    print(header)
    print("-" * len(header))
    for row in rows:
        to_softmax = row["ratio_to_softmax_full"]
        print(f"{row['head']:12s} {row['row']:>5s} {fmt_ms(row['ms_per_step']['median']):>9s} "
              f"{row['steps_per_second_median']:>8.2f} {row['tokens_per_second_median']:>8,.0f} "
              f"{row['speedup_vs_own_full']['ratio_of_medians']:>9.2f} "
              f"{row['speedup_vs_own_full']['cpu_ratio_of_medians']:>8.2f} "
              f"{ratio_cell(to_softmax):>8s}")
    print("(×softmax: heads timed one after the other, not interleaved)", flush=True)
    return result


# --------------------------------------------------------------------------
# Goals and main
# --------------------------------------------------------------------------
def check_goals(args, output_layer):
    result = output_layer.get(str(args.goal_vocab))
    if result is None:
        print(f"\ngoals: |V| = {args.goal_vocab:,} not timed (--vocab-sizes), no goal checked")
        return None
    goals = {"vocab": args.goal_vocab, "speedup": [], "joint_vs_softmax": None}
    print(f"\ngoals at |V| = {args.goal_vocab:,} (output layer + loss + optimizer step, "
          "ratio of medians):")
    for fraction, goal in SPEEDUP_GOALS.items():
        cells = []
        for row in result["rows"]:
            if row["fraction"] == fraction:
                value = row["speedup_vs_own_full"]["ratio_of_medians"]
                goals["speedup"].append({"head": row["head"], "fraction": fraction,
                                         "speedup": value, "goal": goal, "met": value >= goal})
                cells.append(f"{row['head']} {value:.2f}× ({'met' if value >= goal else 'MISSED'})")
        if cells:
            print(f"  {100 * fraction:g}% vs own full softmax, goal >= {goal:g}×: " + ", ".join(cells))
        else:
            print(f"  {100 * fraction:g}%: not among --fractions")
    joint = f"joint({args.goal_joint_dim})"
    row = next((r for r in result["rows"] if r["head"] == joint
                and r["fraction"] == JOINT_GOAL_FRACTION), None)
    if row is not None and row["ratio_to_softmax_full"] is not None:
        value = row["ratio_to_softmax_full"]["ratio_of_medians"]
        goals["joint_vs_softmax"] = {"head": joint, "fraction": JOINT_GOAL_FRACTION,
                                     "ratio": value, "goal": JOINT_GOAL, "met": value >= JOINT_GOAL}
        print(f"  {joint} at {100 * JOINT_GOAL_FRACTION:g}% vs softmax full (tokens/s ratio): "
              f"{value:.2f} ({goal_text(value, JOINT_GOAL)})")
    else:
        print(f"  {joint} at {100 * JOINT_GOAL_FRACTION:g}% or softmax full not timed")
    if args.quick:
        print("  (--quick sizes: a smoke test, not a measurement of the goals)")
    return goals


def describe_update(output_layer):
    """One line on what the optimizer did with the sparse gradients, from the traced graphs."""
    for result in output_layer.values():
        for row in result["rows"]:
            update = row["optimizer_update"]
            sparse = [path for path, kind in update["gradient_types"].items()
                      if kind == "IndexedSlices"]
            if row["fraction"] is not None and sparse:
                how = ("scatter (sparse) update" if update["scatter_update_ops"]
                       else "dense update over all |V| rows")
                print(f"\noptimizer: in sampled rows the gradients of {', '.join(sparse)} are "
                      f"IndexedSlices; the traced step has {update['scatter_update_ops']} scatter "
                      f"op(s) and {update['densifying_ops (UnsortedSegmentSum)']} "
                      f"UnsortedSegmentSum (densifying) op(s): a {how} (example: {row['head']} "
                      f"{row['row']}, |V| {row['vocab']:,})")
                return {"example": f"{row['head']} {row['row']} |V| {row['vocab']}",
                        "sparse_gradients": sparse, "update": how, **update}
    return None


def main(args):
    if args.probe:
        run_probe(args)
        return None
    tf.random.set_seed(args.seed)
    machine = machine_info()
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {machine['cpu_count']} CPUs, "
          f"devices {machine['devices']}", flush=True)
    print(f"|V| {args.vocab_list}, d = {args.embedding_dim}, d_h = {args.hidden_dim}, joint "
          f"{args.joint_list}, p {args.fraction_list}, batch {args.batch_size} × "
          f"{args.target_length}, {args.optimizer} (clipnorm {args.clipnorm or 'none'})"
          + (" (--quick)" if args.quick else ""), flush=True)
    specs = head_specs(args.joint_list)
    started = time.perf_counter()

    memory = run_memory(args, specs) if args.memory else None
    output_layer = {}
    for vocab in args.vocab_list:
        output_layer[str(vocab)] = run_output_layer(args, vocab, specs)
    update = describe_update(output_layer)
    model = {}
    if args.model:
        for vocab in args.model_vocab_list:
            model[str(vocab)] = run_model(args, vocab)
    if memory is not None:
        print_memory_table(memory)
    goals = check_goals(args, output_layer)

    record = write_record("sampled", args, machine, started, {
        "heads": specs,
        "optimizer_update": update,
        "output_layer": output_layer,
        "memory": memory,
        "model": model if args.model else None,
        "goals": goals,
    }, exclude=("probe",))
    return record


if __name__ == "__main__":
    main(ARGS)

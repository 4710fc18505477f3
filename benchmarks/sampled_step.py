"""The output layer + loss step that `sampled.py` times, its data and its memory probe.

Imported by `sampled.py` after `common.setup` (TensorFlow's thread pools are
set by then); the probe's child side (`run_probe`) runs in a fresh
`sampled.py --probe` process. See benchmarks/docs/sampled.md.
"""

import gc
import json
import re
import resource
import sys

import keras
import numpy as np
import tensorflow as tf

from common import random_sentences, training_batches, zipf_sentences
from tf_outheads.layers.heads import build_head
from tf_outheads.losses.cross_entropy import MaskedSequenceCrossEntropy
from tf_outheads.losses.sampled_softmax import SampledSoftmaxLoss
from tf_outheads.ops import candidate_sampling
from tf_outheads.losses.objective import Objective, StepOutputs

SOFTMAX = "softmax"
FULL = "full"
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
    k = candidate_sampling.num_candidates_for(fraction, vocab)
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
    draw = zipf_sentences if distribution == "zipf" else random_sentences
    return draw(rng, rows, length, vocab)


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
    return training_batches(args, rng, source_vocab, target_vocab,
                            lambda *shape: target_ids(*shape, args.targets))


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

"""1 device vs MirroredStrategy over 2 logical CPUs on the same global batches (subprocess).

    python mirrored_script.py WORK_DIR OUTPUT.json [--clipnorm C] [--keras-fit]

Prints nothing; writes the largest weight difference between the two runs
(and, with --keras-fit, between 1 device and Keras' own `model.fit` under the
same strategy) to OUTPUT.json.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tf_outheads.training import split_cpu  # noqa: E402

split_cpu(2)  # before TensorFlow initialises its devices

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads import compile_for_translation, data, training  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402
from tf_outheads_zoo.presets import EMBEDDED_CORPUS  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work_dir")
    parser.add_argument("output")
    parser.add_argument("--clipnorm", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--keras-fit", action="store_true")
    parser.add_argument("--precision", default="float32")
    args = parser.parse_args()
    tf.config.experimental.enable_op_determinism()
    corpus = data.read_tsv(EMBEDDED_CORPUS, split="train").select(range(400))
    source, target = data.build_tokenizers(corpus.sources, corpus.targets,
                                           os.path.join(args.work_dir, "tokenizer"),
                                           vocab_size=300, seed=1)

    def train(strategy, keras_fit=False, batch_tokens=600, accumulation_steps=1):
        training.set_precision(args.precision)
        keras.utils.set_random_seed(7)
        batches = data.dataset_from_corpus(corpus, source, target, batch_tokens=batch_tokens,
                                           seed=3, repeat=True)
        with strategy.scope():
            model = LSTMSeq2Seq(source.vocab_size, target.vocab_size, embedding_dim=16,
                                hidden_dim=16, num_layers=1, dropout=0.0,
                                head={"class_name": "joint", "config": {"joint_dim": 24}},
                                # Keras' initializers (weights of magnitude ~1, which the
                                # 1e-4 tolerance is set against), not U(±0.1).
                                uniform_init=None)
            # A small clipnorm clips every step: summing before clipping matters.
            compile_for_translation(model, learning_rate=1e-2, clipnorm=args.clipnorm)
        if keras_fit:
            model.fit(batches, epochs=1, steps_per_epoch=args.steps, verbose=0)
            losses = []
        else:
            losses = training.fit(model, batches, epochs=1, steps_per_epoch=args.steps,
                                  accumulation_steps=accumulation_steps,
                                  verbose=0).history["loss"]
        return [variable.numpy() for variable in model.trainable_variables], losses

    one, one_loss = train(tf.distribute.get_strategy())
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    two, two_loss = train(mirrored)
    # Batches of one sentence (batch_tokens below two sentences' length): one
    # replica gets it, the other a copy whose labels are all padding; 2 of
    # them accumulated per update.
    one_single, _ = train(tf.distribute.get_strategy(), batch_tokens=45, accumulation_steps=2)
    two_single, _ = train(mirrored, batch_tokens=45, accumulation_steps=2)
    report = {"replicas": mirrored.num_replicas_in_sync,
              "single_sentence_max_abs_difference": max(
                  float(np.abs(a - b).max()) for a, b in zip(one_single, two_single)),
              "max_abs_difference": max(float(np.abs(a - b).max()) for a, b in zip(one, two)),
              "max_abs_weight": max(float(np.abs(a).max()) for a in one),
              "loss": [one_loss, two_loss]}
    if args.keras_fit:
        fitted, _ = train(mirrored, keras_fit=True)
        report["keras_fit_max_abs_difference"] = max(
            float(np.abs(a - b).max()) for a, b in zip(one, fitted))
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()

"""A small training run for the fault-tolerance tests (run as a subprocess).

    python resume_script.py WORK_DIR [--steps-per-epoch N] [--epochs E] [--sleep S]

Trains a tiny LSTM on the first 400 verses of the embedded corpus with
backups every 2 steps in WORK_DIR/backup, appends `{"step", "fingerprint",
"loss"}` per step to WORK_DIR/steps.jsonl (flushed, so a killed run keeps its
lines) and writes the final weights to WORK_DIR/final.npz.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads import compile_for_translation, data, training  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402
from tf_outheads_zoo.presets import EMBEDDED_CORPUS  # noqa: E402


class StepLog(keras.callbacks.Callback):
    def __init__(self, path, sleep):
        super().__init__()
        self.path, self.sleep = path, sleep

    def on_train_batch_end(self, batch, logs=None):
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"step": logs["step"], "fingerprint": logs["data_fingerprint"],
                                "loss": logs["step_loss"]}) + "\n")
            f.flush()
        time.sleep(self.sleep)  # lets the test kill the run mid-epoch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work_dir")
    parser.add_argument("--steps-per-epoch", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args()
    tf.config.experimental.enable_op_determinism()
    keras.utils.set_random_seed(11)
    corpus = data.read_tsv(EMBEDDED_CORPUS, split="train").select(range(400))
    source, target = data.build_tokenizers(corpus.sources, corpus.targets,
                                           os.path.join(args.work_dir, "tokenizer"),
                                           vocab_size=300, seed=1)
    batches = data.dataset_from_corpus(corpus, source, target, batch_tokens=500, seed=5,
                                       repeat=True)
    model = LSTMSeq2Seq(source.vocab_size, target.vocab_size, embedding_dim=16, hidden_dim=16,
                        num_layers=1, dropout=0.2, head="tied")
    compile_for_translation(model, learning_rate=1e-2)
    training.fit(model, batches, epochs=args.epochs, steps_per_epoch=args.steps_per_epoch,
                 callbacks=[StepLog(os.path.join(args.work_dir, "steps.jsonl"), args.sleep)],
                 backup_dir=os.path.join(args.work_dir, "backup"), backup_every_n_steps=2,
                 verbose=2)
    np.savez(os.path.join(args.work_dir, "final.npz"),
             *[variable.numpy() for variable in model.variables])


if __name__ == "__main__":
    main()

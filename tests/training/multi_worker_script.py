"""One worker of the 2-process MultiWorkerMirroredStrategy test (run as a subprocess).

    TF_CONFIG=... python multi_worker_script.py WORK_DIR OUTPUT.npz

Without TF_CONFIG it runs the same training on one device (the reference).
Every worker trains the same tiny LSTM on the first 300 verses of the
embedded corpus for a few steps and writes its final weights to OUTPUT.npz.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tf_outheads import compile_for_translation, data, training  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402
from tf_outheads_zoo.presets import EMBEDDED_CORPUS  # noqa: E402


class StopOnOneWorker(keras.callbacks.Callback):
    """Stops after step 3 on worker 1 only (a wall-clock limit can differ so):
    every worker must stop there too. The one-device reference stops there."""

    def __init__(self, task):
        super().__init__()
        self.task = task

    def on_train_batch_end(self, batch, logs=None):
        if self.task in (1, "single") and logs["step"] == 3:
            self.model.stop_training = True


def main(work_dir, output):
    strategy = training.make_strategy("multi_worker" if "TF_CONFIG" in os.environ else "default")
    keras.utils.set_random_seed(5)
    corpus = data.read_tsv(EMBEDDED_CORPUS, split="train").select(range(300))
    config = json.loads(os.environ.get("TF_CONFIG", "{}"))
    task = config["task"]["index"] if config else "single"
    source, target = data.build_tokenizers(corpus.sources, corpus.targets,
                                           os.path.join(work_dir, f"tokenizer-{task}"),
                                           vocab_size=300, seed=1)
    batches = data.dataset_from_corpus(corpus, source, target, batch_tokens=500, seed=5,
                                       repeat=True)
    with strategy.scope():
        model = LSTMSeq2Seq(source.vocab_size, target.vocab_size, embedding_dim=16,
                            hidden_dim=16, num_layers=1, dropout=0.0, head="tied")
        compile_for_translation(model, learning_rate=1e-2, clipnorm=1.0)
    history = training.fit(model, batches, epochs=1, steps_per_epoch=5, verbose=0,
                           callbacks=[StopOnOneWorker(task)],
                           backup_dir=os.path.join(work_dir, "backup" if config else "backup-single"))
    np.savez(output, *[variable.numpy() for variable in model.variables],
             loss=np.array(history.history["loss"]),
             replicas=np.array(strategy.num_replicas_in_sync),
             steps=np.array(int(model.optimizer.iterations.numpy())))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

"""One worker of the 2-process sharded-input test (run as a subprocess).

    TF_CONFIG=... python sharded_worker_script.py WORK_DIR OUTPUT.npz

WORK_DIR holds `train.es` / `train.en` (written by the test). Each worker:

1. reads one epoch of its shard of the files (`make_text_dataset(num_shards=2)`,
   no repeat) and records the target rows it got (worker 0 also records one
   epoch of the whole corpus, unsharded);
2. trains a tiny LSTM on its shard (`training.fit(per_worker_data=True)`) for 4
   steps without a break (the reference), then a new model of the same seed for
   2 steps, and resumes it for 2 more in a new `fit` call from the backup (its
   weights, and each worker's own iterator);
3. writes both final weights and the rows to OUTPUT.npz.
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tf_outheads import compile_for_translation, data, training  # noqa: E402
from tf_outheads.data.special_tokens import PAD_ID  # noqa: E402
from tf_outheads.training.strategy import chief_first, worker_index  # noqa: E402
from tf_outheads_zoo.lstm import LSTMSeq2Seq  # noqa: E402


def rows(dataset):
    found = []
    for _, target_out in dataset:
        found += [" ".join(map(str, row[row != PAD_ID])) for row in target_out.numpy()]
    return found


def main(work_dir, output):
    strategy = training.make_strategy("multi_worker")
    index = worker_index(strategy)
    pairs = [(os.path.join(work_dir, "train.es"), os.path.join(work_dir, "train.en"))]
    sample = data.scan_parallel_files(pairs).sample
    source, target = chief_first(strategy, lambda: data.build_tokenizers(
        sample.sources, sample.targets, os.path.join(work_dir, "tokenizer"), vocab_size=300,
        seed=1))

    def dataset(**options):
        return data.make_text_dataset(pairs, source, target, num_shards=2, shard_index=index,
                                      batch_tokens=250, seed=5, shuffle_buffer=100, **options)

    record = {"epoch": rows(dataset())}
    if index == 0:
        record["whole"] = rows(data.make_text_dataset(pairs, source, target, batch_tokens=250,
                                                      seed=5, shuffle_buffer=100))
    weights = {}
    for name, breaks in (("reference", [4]), ("resumed", [2, 4])):
        keras.utils.set_random_seed(5)
        with strategy.scope():
            model = LSTMSeq2Seq(source.vocab_size, target.vocab_size, embedding_dim=16,
                                hidden_dim=16, num_layers=1, dropout=0.0, head="tied")
            compile_for_translation(model, learning_rate=1e-2, clipnorm=1.0)
        for steps in breaks:  # a new fit call (and dataset) after a break: a resumed run
            training.fit(model, dataset(repeat=True), epochs=steps // 2, steps_per_epoch=2,
                         verbose=0, per_worker_data=True,
                         backup_dir=os.path.join(work_dir, f"backup-{name}"))
        weights[name] = [variable.numpy() for variable in model.variables]
        record[f"{name}_steps"] = int(model.optimizer.iterations.numpy())
    np.savez(output, *weights["reference"], *weights["resumed"],
             count=np.array(len(weights["reference"])), record=np.array(json.dumps(record)))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

# %% [markdown]
# # Several GPUs, several hosts, mixed precision, and resuming after a crash
#
# `tf_outheads.training.fit(model, dataset, ...)` trains a compiled model with
# the `tf.distribute` strategy it was built under. The call is the same for one
# device, for every GPU of a machine (`MirroredStrategy`) and for several
# machines (`MultiWorkerMirroredStrategy`, hosts from `TF_CONFIG`):
#
#     strategy = training.make_strategy("mirrored")     # or "default", "multi_worker"
#     with strategy.scope():
#         model = LSTMSeq2Seq(...)
#         compile_for_translation(model, ...)
#     training.fit(model, batches, epochs=..., steps_per_epoch=..., backup_dir=...)
#
# What it guarantees, shown below on the embedded Spanish→English Bible corpus:
#
# 1. the dataset yields *global* batches; each is split sentence-wise across the
#    replicas and the loss is the per-token mean over the whole global batch,
#    with the gradients summed *before* clipping, so 2 replicas train like one
#    device on the same batches (Keras' own `model.fit` clips per replica);
# 2. 2 worker processes (here on 127.0.0.1; on a cluster, one per host) end
#    with identical weights;
# 3. mixed precision (`mixed_float16` with dynamic loss scaling on a GPU,
#    `mixed_bfloat16`) and gradient accumulation are settings, not new code;
# 4. backups are atomic and hold the weights, the optimizer, the RNG states and
#    the position of the data iterator: a run that crashes mid-epoch resumes
#    at the step it had backed up and ends with the same weights as a run that
#    never stopped; a damaged backup is reported by file name;
# 5. the last backups can be averaged into the final model.
#
# On a machine without GPUs the host CPU is split into 2 logical devices
# (`split_cpu(2)`), which is how the tests execute this tutorial. Run it as a
# script (`python tutorials/08_distributed_training.py`, about ten minutes on a
# 2-core CPU) or as a notebook (percent format). `DISTRIBUTED_TUTORIAL_TINY=1`
# shrinks every setting so the test suite runs it in about a minute.

# %%
import json
import os
import socket
import subprocess
import sys
import tempfile

from tf_outheads import training

# Logical devices, and a multi-worker strategy, must be set up before
# TensorFlow runs its first op. A worker process started by section 2 builds
# its strategy from TF_CONFIG here (one device per worker).
WORKER = os.environ.get("DISTRIBUTED_TUTORIAL_WORKER")
if WORKER is None:
    CPU_DEVICES = training.split_cpu(2)
else:
    WORKER_STRATEGY = training.make_strategy("multi_worker")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tf_outheads import compile_for_translation, corpus_bleu, data, translate  # noqa: E402
from tf_outheads.training import BackupManager, CheckpointError  # noqa: E402
from tf_outheads_zoo import LSTMSeq2Seq  # noqa: E402
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS  # noqa: E402

TINY = os.environ.get("DISTRIBUTED_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("DISTRIBUTED_TUTORIAL_RUN_DIR") or tempfile.mkdtemp(prefix="dist-")
SEED = 1234

# Every size in one place: (tiny test setting, CPU setting).
TRAIN_VERSES = 400 if TINY else 8000
VOCAB_SIZE = 300 if TINY else 2000
SIZE = 16 if TINY else 128
BATCH_TOKENS = 600 if TINY else 2048      # the *global* batch
STEPS = 6 if TINY else 150                # optimizer updates per section
DEV_VERSES = 20 if TINY else 200

# Deterministic kernels: equal inputs give bit-equal results, run after run.
tf.config.experimental.enable_op_determinism()

# %% [markdown]
# ## 0. Corpus, tokenizer, batches
# `batch_tokens` is the budget of one global batch: with 2 replicas each gets
# about half of its sentences. Every worker reads the same stream (same seed),
# so the global batch is the same whatever the number of replicas.

# %%
train = data.read_tsv(EMBEDDED_CORPUS, split="train").select(range(TRAIN_VERSES))
train, _ = data.strip_suffixes(train, BIBLE_WEB_ARTIFACTS)
dev, _ = data.strip_suffixes(data.read_tsv(EMBEDDED_CORPUS, split="dev"), BIBLE_WEB_ARTIFACTS)
dev = dev.select(range(DEV_VERSES))
source_tokenizer, target_tokenizer = data.build_tokenizers(
    train.sources, train.targets, os.path.join(RUN_DIR, f"tokenizer-{WORKER or 'main'}"),
    vocab_size=VOCAB_SIZE, seed=1)


def batches():
    return data.dataset_from_corpus(train, source_tokenizer, target_tokenizer,
                                    batch_tokens=BATCH_TOKENS, seed=SEED, repeat=True)


def build(strategy, clipnorm=1.0, precision="float32", dropout=0.0):
    """The same model, built and compiled inside `strategy.scope()`."""
    training.set_precision(precision)
    keras.utils.set_random_seed(SEED)
    with strategy.scope():
        model = LSTMSeq2Seq(source_tokenizer.vocab_size, target_tokenizer.vocab_size,
                            embedding_dim=SIZE, hidden_dim=SIZE, num_layers=1, dropout=dropout,
                            head={"class_name": "joint", "config": {"joint_dim": 2 * SIZE}})
        compile_for_translation(model, learning_rate=5e-3, clipnorm=clipnorm,
                                label_smoothing=0.1)
    return model


def max_difference(first, second):
    return max(float(np.abs(a - b).max()) for a, b in zip(first, second))


def weights(model):
    return [variable.numpy() for variable in model.trainable_variables]


# %% [markdown]
# ## 2 (worker side). What each worker of a multi-worker job runs
# Section 2 starts this file twice with `TF_CONFIG` set; each process builds
# the strategy from it and runs the very same call as everywhere else.

# %%
if WORKER is not None:
    strategy = WORKER_STRATEGY
    model = build(strategy)
    training.fit(model, batches(), epochs=1, steps_per_epoch=STEPS, verbose=0,
                 backup_dir=os.path.join(RUN_DIR, "multi-worker-backup"))
    np.savez(os.path.join(RUN_DIR, f"worker-{WORKER}.npz"), *weights(model),
             replicas=strategy.num_replicas_in_sync)
    sys.exit(0)

# %% [markdown]
# ## 1. One device vs 2 replicas on the same global batches
# A small `clipnorm` (0.05) clips every step: this is where summing the
# replicas' gradients before clipping matters. No dropout in this comparison:
# its random masks are drawn per replica, for half the sentences each, so with
# dropout the two runs are equivalent in distribution only.

# %%
print("=== MIRRORED ===")
one_device = build(tf.distribute.get_strategy(), clipnorm=0.05)
training.fit(one_device, batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)

gpus = tf.config.list_physical_devices("GPU")
mirrored = training.make_strategy("mirrored") if len(gpus) > 1 else \
    training.make_strategy("mirrored", devices=CPU_DEVICES)
print(f"replicas: {mirrored.num_replicas_in_sync} on {list(mirrored.extended.worker_devices)}")
two_replicas = build(mirrored, clipnorm=0.05)
history = training.fit(two_replicas, batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)
print(f"training loss after {STEPS} steps: {history.history['loss'][-1]:.4f}")
print(f"max |weight difference| 1 device vs 2 replicas: "
      f"{max_difference(weights(one_device), weights(two_replicas)):.2e}")

# %% [markdown]
# ## 2. Two worker processes on localhost (one per host on a cluster)
# `TF_CONFIG` lists the workers and says which one this process is. Here both
# listen on 127.0.0.1; on a cluster each host runs the same command with its
# own `task.index`. The chief (worker 0) writes the backups; the others write
# nothing in its directories.

# %%
print("=== MULTI-WORKER ===")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


cluster = {"worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]}
workers = []
for index in range(2):
    env = dict(os.environ, DISTRIBUTED_TUTORIAL_WORKER=str(index), DISTRIBUTED_TUTORIAL_RUN_DIR=RUN_DIR,
               TF_CONFIG=json.dumps({"cluster": cluster,
                                     "task": {"type": "worker", "index": index}}))
    workers.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)], env=env))
codes = [worker.wait(timeout=1800) for worker in workers]
print(f"worker exit codes: {codes}")
results = [np.load(os.path.join(RUN_DIR, f"worker-{index}.npz")) for index in range(2)]
worker_weights = [[r[f"arr_{i}"] for i in range(len(weights(one_device)))] for r in results]
print(f"replicas in the job: {int(results[0]['replicas'])}")
print(f"workers' weights identical: "
      f"{all(np.array_equal(a, b) for a, b in zip(*worker_weights))}")
reference = build(tf.distribute.get_strategy())
training.fit(reference, batches(), epochs=1, steps_per_epoch=STEPS, verbose=0)
print(f"max |weight difference| workers vs 1 device: "
      f"{max_difference(worker_weights[0], weights(reference)):.2e}")

# %% [markdown]
# ## 3. Mixed precision and gradient accumulation
# `set_precision` before building the model. Under `mixed_float16` Keras
# wraps the optimizer in a `LossScaleOptimizer` and the trainer scales the
# loss, unscales the gradients and skips overflowing steps; `mixed_bfloat16`
# needs no scaling. On a CPU both are slower than float32 — they are for GPUs
# (and TPUs); the weights stay float32 and the heads compute in float32.
# `accumulation_steps=2` sums the gradients of 2 global batches before one
# update, each weighted by its share of the tokens: the update of a batch twice
# as large.

# %%
print("=== PRECISION ===")
for precision in ("mixed_float16", "mixed_bfloat16"):
    model = build(mirrored, precision=precision)
    history = training.fit(model, batches(), epochs=1, steps_per_epoch=2, verbose=0)
    print(f"{precision}: optimizer {type(model.optimizer).__name__}, "
          f"variables {model.trainable_variables[0].dtype}, "
          f"loss {history.history['loss'][-1]:.3f}")
training.set_precision("float32")
accumulated = build(mirrored)
history = training.fit(accumulated, batches(), epochs=1, steps_per_epoch=STEPS // 2,
                       accumulation_steps=2, verbose=0)
print(f"accumulation_steps=2: {int(accumulated.optimizer.iterations.numpy())} updates from "
      f"{STEPS} global batches, loss {history.history['loss'][-1]:.3f}")

# %% [markdown]
# ## 4. A crash mid-epoch, and the run started again
# Backups every 2 steps (and at every epoch's end) in `backup_dir`. The crash
# is simulated by a callback raising at step 5, after the backup of step 4;
# calling `fit` again with the same `backup_dir` restores step 4 — weights,
# Adam's moments, dropout's RNG state and the data iterator's position — and
# goes on with the batch that step 5 had. A real `kill -9` behaves the same
# (the tests do exactly that).

# %%
print("=== RESUME ===")


class Crash(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if logs["step"] == 5:
            raise KeyboardInterrupt("simulated crash at step 5")


backup_dir = os.path.join(RUN_DIR, "backup")
EPOCHS, PER_EPOCH = 2, STEPS // 2 + 1
uninterrupted = build(mirrored, dropout=0.1)
training.fit(uninterrupted, batches(), epochs=EPOCHS, steps_per_epoch=PER_EPOCH, verbose=0)
crashing = build(mirrored, dropout=0.1)
try:
    training.fit(crashing, batches(), epochs=EPOCHS, steps_per_epoch=PER_EPOCH, verbose=0,
                 callbacks=[Crash()], backup_dir=backup_dir, backup_every_n_steps=2)
except KeyboardInterrupt as error:
    print(f"crashed: {error}")
print(f"backups on disk: {[os.path.basename(p) for _, p in BackupManager(backup_dir).checkpoints()]}")
restarted = build(mirrored, dropout=0.1)  # a new process would build it again
training.fit(restarted, batches(), epochs=EPOCHS, steps_per_epoch=PER_EPOCH, verbose=1,
             backup_dir=backup_dir, backup_every_n_steps=2)
print(f"max |weight difference| resumed vs uninterrupted: "
      f"{max_difference(weights(restarted), weights(uninterrupted)):.2e}")

# %% [markdown]
# A backup is written under a temporary name and renamed into place when
# complete, with a manifest of its files' sizes and SHA-256. If a file is
# damaged anyway (a full disk, a bad copy), the error names it and the previous
# backup:

# %%
newest, = BackupManager(backup_dir).last(1)
data_file = next(os.path.join(newest, n) for n in os.listdir(newest) if ".data-" in n)
with open(data_file, "r+b") as f:
    f.truncate(os.path.getsize(data_file) // 2)
try:
    training.fit(build(mirrored, dropout=0.1), batches(), epochs=EPOCHS + 1, steps_per_epoch=PER_EPOCH,
                 verbose=0, backup_dir=backup_dir)
except CheckpointError as error:
    print(f"CheckpointError: {error}")

# %% [markdown]
# ## 5. Averaging the last backups
# Vaswani et al. (2017) report the average of the last checkpoints. The
# weights of the last 2 intact backups of the uninterrupted-equivalent run,
# averaged, and both models translated with greedy search:

# %%
print("=== AVERAGE ===")
intact = [path for _, path in BackupManager(backup_dir).checkpoints()][:-1][-2:]
averaged = build(mirrored, dropout=0.1)
averaged(next(iter(batches()))[0])  # build the weights
training.average_checkpoints(averaged, intact)
for name, model in (("last", restarted), ("average of 2", averaged)):
    hypotheses = translate(model, dev.sources, source_tokenizer, target_tokenizer)
    print(f"{name}: dev BLEU {corpus_bleu(hypotheses, dev.targets).score:.2f} "
          f"({len(dev)} verses)")
print(f"averaged: {[os.path.basename(p) for p in intact]}")

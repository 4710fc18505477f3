# %% [markdown]
# # Large vocabularies: training with a sampled softmax
#
# A full softmax scores every word of the vocabulary at every target position:
# `B·T·|V|` logits per batch, and for a joint input-output head (Pappas et al.
# 2018) also `E' = σ(E·U + b_u)` over all `|V|` rows. With a large BPE
# vocabulary that dominates a training step. `tf_outheads.SampledSoftmaxLoss`
# scores only a candidate set per batch — every target word of the batch plus
# uniformly drawn negatives, `⌈p·|V|⌉` words in all (§3.2 and Table 4 of the
# paper) — through the head's `logits_for`, so the joint head projects only the
# candidate rows of `E`. Validation and decoding still use the full softmax.
#
# This tutorial trains the same attentional LSTM with a joint head twice on the
# embedded Spanish→English Bible corpus with a large target vocabulary: once with
# the full softmax and once with 5 % sampling, from the same seed, for the same
# steps; it prints what one step scores, the time per step and the dev BLEU of
# both.
#
# Run it as a script (`python tutorials/03_sampled_softmax.py`, about ten minutes
# on a 2-core CPU) or open it as a notebook (percent format).
# `SAMPLED_TUTORIAL_TINY=1` shrinks every setting so the test suite can execute
# it in well under a minute; its BLEU means nothing then.

# %%
import os
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from tf_outheads import (SampledSoftmaxLoss, compile_for_translation, corpus_bleu, data,
                         translate)
from tf_outheads.ops import candidate_sampling
from tf_outheads_zoo import LSTMSeq2Seq
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS

TINY = os.environ.get("SAMPLED_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("SAMPLED_TUTORIAL_RUN_DIR") or tempfile.mkdtemp(prefix="sampled-")
SEED = 1234

TARGET_VOCAB = 3000 if TINY else 32000   # large: the most the Bible gives per language
SOURCE_VOCAB = 1000 if TINY else 8000
SIZE = 32 if TINY else 256
JOINT_DIM = 64 if TINY else 512
FRACTION = 0.05                            # p: 5 % of the vocabulary per batch
STEPS_PER_EPOCH, EPOCHS = (8, 2) if TINY else (200, 2)
BATCH_TOKENS = 1024 if TINY else 2048

# %% [markdown]
# ## 1. Corpus and tokenizers
# Separate SentencePiece models: a small source vocabulary and a large target one.

# %%
splits = {}
for split in ("train", "dev"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, source="es", target="en_web", references=(),
                           split=split)
    splits[split], _ = data.strip_suffixes(corpus, BIBLE_WEB_ARTIFACTS)
train, dev = splits["train"], splits["dev"]
train, dev = (train.select(range(3000)), dev.select(range(10))) if TINY else (train, dev.select(range(200)))
train, report = data.clean(train, max_length=60 if TINY else 80, max_length_ratio=2.5,
                           drop_containing=BIBLE_WEB_ARTIFACTS)
# One SentencePiece model per side, each with its own size (build_tokenizers
# gives both sides one size).
source_model = data.train_sentencepiece(train.sources, os.path.join(RUN_DIR, "spm_source"),
                                        SOURCE_VOCAB, seed=SEED)
target_model = data.train_sentencepiece(train.targets, os.path.join(RUN_DIR, "spm_target"),
                                        TARGET_VOCAB, seed=SEED)


def load_tokenizers():
    return data.SubwordTokenizer(source_model), data.SubwordTokenizer(target_model)


source_tokenizer, target_tokenizer = load_tokenizers()
print(f"{len(train)} training pairs; vocabularies: source {source_tokenizer.vocab_size}, "
      f"target {target_tokenizer.vocab_size}")

# %% [markdown]
# ## 2. What one training step scores
# `candidate_sampling.batch_candidates` is what the loss calls on every batch: the distinct
# target ids first, then uniform negatives up to `K = ⌈p·|V|⌉`. A batch with
# more distinct targets than `K` keeps them all (the set grows; the authors'
# code crashed there).

# %%
batches = data.dataset_from_corpus(train, source_tokenizer, target_tokenizer,
                                   batch_tokens=BATCH_TOKENS, repeat=True, seed=1)
_, target_out = next(iter(batches))
vocabulary_size = target_tokenizer.vocab_size
num_candidates = candidate_sampling.num_candidates_for(FRACTION, vocabulary_size)
candidate_ids, labels = candidate_sampling.batch_candidates(
    target_out, vocabulary_size, num_candidates, seed=tf.constant([SEED, 0]))
positives = np.unique(target_out.numpy())
print("=== CANDIDATES ===")
print(f"batch {tuple(target_out.shape)}: {int(np.sum(target_out.numpy() != 0))} target tokens, "
      f"{len(positives)} distinct words")
print(f"K = ceil({FRACTION} * {vocabulary_size}) = {num_candidates}; "
      f"candidate set: {len(candidate_ids)} words "
      f"({len(candidate_ids) / vocabulary_size:.1%} of the vocabulary)")
assert set(positives) <= set(candidate_ids.numpy().tolist())
assert np.array_equal(tf.gather(candidate_ids, labels).numpy(), target_out.numpy())

# %% [markdown]
# ## 3. Two models, one seed: full vs sampled softmax
# The loss is the only difference. `SampledSoftmaxLoss` has its own label
# smoothing (spread over the candidates in training, over the vocabulary in
# evaluation, where it is exactly the full loss).

# %%
JOINT = {"class_name": "joint", "config": {"joint_dim": JOINT_DIM}}
LOSSES = {
    "full": None,
    f"sampled {FRACTION:.0%}": SampledSoftmaxLoss(fraction=FRACTION, label_smoothing=0.1,
                                                  seed=SEED),
}


def build_model(loss):
    keras.utils.set_random_seed(SEED)
    model = LSTMSeq2Seq(source_tokenizer.vocab_size, vocabulary_size, embedding_dim=SIZE,
                        hidden_dim=SIZE, num_layers=1, bidirectional_encoder=True,
                        dropout=0.1, head=JOINT)
    if loss is None:
        compile_for_translation(model, learning_rate=3e-3, label_smoothing=0.1)
    else:
        compile_for_translation(model, learning_rate=3e-3, loss=loss)
    return model


# %% [markdown]
# ## 4. Train both for the same steps; time them; translate; score
# The training loss of the sampled model is over its candidates (lower than a
# full softmax's); `evaluate` gives the full-softmax loss for both: comparable.

# %%
# set_random_seed (in build_model) frees the SentencePiece ops of tokenizers
# built before it: load them again before each pipeline.
results = {}
for name, loss in LOSSES.items():
    model = build_model(loss)
    source_tokenizer, target_tokenizer = load_tokenizers()
    batches = data.dataset_from_corpus(train, source_tokenizer, target_tokenizer,
                                       batch_tokens=BATCH_TOKENS, repeat=True, seed=1)
    dev_batches = data.dataset_from_corpus(dev, source_tokenizer, target_tokenizer,
                                           batch_tokens=BATCH_TOKENS)
    print(f"=== TRAINING [{name}] ===")
    model.fit(batches, steps_per_epoch=2, epochs=1, verbose=0)  # tracing, not timed
    start = time.perf_counter()
    history = model.fit(batches, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, verbose=2)
    seconds = (time.perf_counter() - start) / (STEPS_PER_EPOCH * EPOCHS)
    hypotheses = translate(model, dev.sources, source_tokenizer, target_tokenizer)
    results[name] = {"seconds_per_step": seconds,
                     "loss": [round(v, 3) for v in history.history["loss"]],
                     "dev_loss": model.evaluate(dev_batches, verbose=0),
                     "bleu": corpus_bleu(hypotheses, dev.targets)}

print("=== RESULTS ===")
for name, result in results.items():
    print(f"[{name}] {result['seconds_per_step'] * 1000:.0f} ms/step, training loss per epoch "
          f"{result['loss']}, dev loss (full softmax) {result['dev_loss']:.3f}, "
          f"BLEU {result['bleu'].score:.2f}")
full, sampled = results.values()
print(f"speed-up of the sampled model: {full['seconds_per_step'] / sampled['seconds_per_step']:.2f}x")

# %% [markdown]
# # ReWE: regressing word embeddings as a regulariser, added to an existing model
#
# Jauregi Unanue et al. (2019) keep the usual softmax output of an NMT decoder
# and add, on the same decoder state s_j, a small network that predicts the
# *embedding* of the next word:
#
#     e_j = W_2·ReLU(W_1·s_j + b_1) + b_2                                 (Eq. 5)
#     Loss = NLL + λ·(1 − cos(e_j, e(y_j)))      λ = 20                    (Eq. 6–7)
#
# At inference e_j is ignored: the model decodes, exports and counts its
# parameters exactly as the plain model. In `tf_outheads` the network is
# `ReWEHead`, the loss `ReWELoss`, and Eq. 7 is Keras' multi-output
# `compile(loss={...}, loss_weights={...})`; a zoo model takes the head as
# `rewe=...` (an auxiliary head, `model.auxiliary_heads()`). In training and
# evaluation steps the model hands its decoder outputs `{"hidden": h}` to every
# loss, and each loss runs its own head on them.
#
# This tutorial, on the embedded Spanish→English Bible corpus: takes an existing
# model (an attentional LSTM trained with `model.fit`), adds ReWE to it, trains
# both from the same seed for the same steps, and compares the NLL, the ReWE
# loss, time per step, parameters and dev BLEU; then regresses pretrained
# (FastText) vectors instead of the model's own embedding, and saves and
# reloads a ReWE model.
#
# Run it as a script (`python tutorials/05_rewe.py`, about fifteen minutes on a
# 2-core CPU) or open it as a notebook (percent format). `REWE_TUTORIAL_TINY=1`
# shrinks every setting so the test suite can execute it in about a minute; its
# BLEU means nothing then.

# %%
import os
import tempfile
import time

import keras
import numpy as np
import tensorflow as tf

from tf_outheads import (MaskedSequenceCrossEntropy, ReWELoss, Translator,
                         compile_for_translation, corpus_bleu, data, parameter_report)
from tf_outheads_zoo import LSTMSeq2Seq
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS

TINY = os.environ.get("REWE_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("REWE_TUTORIAL_RUN_DIR") or tempfile.mkdtemp(prefix="rewe-")
SEED = 1234

# Every size in one place: (tiny test setting, CPU setting as the lstm-cpu preset).
VOCAB_SIZE = 600 if TINY else 4000     # joint SentencePiece pieces
SIZE = 32 if TINY else 256             # embedding = hidden size
REWE_UNITS = 16 if TINY else 200       # the ReLU layer of Eq. 5 (the paper: 200)
REWE_WEIGHT = 20.0                     # λ of Eq. 7 (the paper, with the cosine loss)
VECTOR_DIM = 32 if TINY else 300       # pretrained vectors of section 6 (the paper: 300)
STEPS_PER_EPOCH, EPOCHS = (8, 2) if TINY else (300, 2)
BATCH_TOKENS = 1024 if TINY else 2048
LEARNING_RATE = 3e-3 if TINY else 5e-3

# %% [markdown]
# ## 1. Corpus and tokenizer
# The SWORD export of the World English Bible appends a Psalm heading to
# thousands of verses; `strip_suffixes` removes it. One joint BPE model for
# both languages, as the zoo's `lstm-cpu` preset.

# %%
splits = {}
for split in ("train", "dev"):
    corpus = data.read_tsv(EMBEDDED_CORPUS, source="es", target="en_web", references=(),
                           split=split)
    splits[split], removed = data.strip_suffixes(corpus, BIBLE_WEB_ARTIFACTS)
    print(f"{split}: {len(splits[split])} verse pairs, boilerplate stripped from "
          f"{sum(removed.values())} targets")
train, dev = splits["train"], splits["dev"]
train, dev = (train.select(range(3000)), dev.select(range(10))) if TINY else (train, dev.select(range(200)))
train, report = data.clean(train, max_length=60 if TINY else 80, max_length_ratio=2.5,
                           drop_containing=BIBLE_WEB_ARTIFACTS)
data.build_tokenizers(train.sources, train.targets, RUN_DIR, vocab_size=VOCAB_SIZE, seed=SEED)
# `keras.utils.set_random_seed` (before each model below) frees the SentencePiece
# ops of tokenizers built before it: load them again whenever needed.
tokenizer, _ = data.load_tokenizers(RUN_DIR)
vocab_size = tokenizer.vocab_size
print(f"{len(train)} training pairs; joint vocabulary of {vocab_size} pieces")

# %% [markdown]
# ## 2. The existing model, and the same model with ReWE
# The plain model is an attentional BiLSTM encoder–decoder with a tied softmax,
# compiled as any Keras model. Adding ReWE takes two changes:
#
# - build it with `rewe={"hidden_dim": 200}`: a `ReWEHead` regressing the
#   model's own target input embedding (read under a stop-gradient, so the
#   ReWE loss never moves the targets). Its weights are created after all the
#   others, so with the same seed every other weight starts from the same value;
# - compile with one loss per head — `"logits"` for the output layer, `"rewe"`
#   for the ReWE head — and λ as the ReWE head's weight.
#
# `model.fit` keeps its usual dataset of `(inputs, target_out)`: in a training
# step the model hands its decoder outputs to both losses; the ReWE loss runs the
# ReWE head on them and reads the gold embeddings from the head's table.

# %%
PLAIN, REWE = "plain", "ReWE"


def build_model(name):
    keras.utils.set_random_seed(SEED)
    model = LSTMSeq2Seq(vocab_size, vocab_size, embedding_dim=SIZE, hidden_dim=SIZE,
                        num_layers=1, bidirectional_encoder=True, dropout=0.1, head="tied",
                        rewe={"hidden_dim": REWE_UNITS} if name == REWE else None)
    optimizer = keras.optimizers.Adam(LEARNING_RATE, clipnorm=5.0)
    nll = MaskedSequenceCrossEntropy(label_smoothing=0.1)
    if name == PLAIN:
        model.compile(optimizer=optimizer, loss=nll)
    else:
        model.compile(optimizer=optimizer,
                      loss={"logits": nll, "rewe": ReWELoss("cosine")},
                      loss_weights={"logits": 1.0, "rewe": REWE_WEIGHT})
    return model


models = {name: build_model(name) for name in (PLAIN, REWE)}
model = models[REWE]
source_ids = np.array([[50, 60, 70, data.EOS_ID]], "int32")
target_in = np.array([[data.BOS_ID, 80, 90]], "int32")
inputs = {"source_ids": source_ids, "target_in": target_in}
print("=== OUTPUTS ===")
# What a training step sees: the decoder outputs, and each head's output on them.
with model.training_outputs():
    training_outputs = model(inputs, training=True)
hidden = training_outputs["hidden"]
heads = {"logits": model.head, **model.auxiliary_heads()}
print(f"training step: {sorted(training_outputs)} {tuple(hidden.shape)}; heads "
      f"{sorted(heads)} with shapes {[tuple(heads[k](hidden).shape) for k in sorted(heads)]}")
print(f"model(x) / predict / decoding: logits {tuple(model(inputs).shape)}")

print("=== PARAMETERS ===")
reports = {name: parameter_report(m) for name, m in models.items()}
for name, params in reports.items():
    groups = ", ".join(f"{group} {count:,}" for group, count in params.groups.items())
    print(f"[{name}] {groups}")
inference = {group: count for group, count in reports[REWE].groups.items() if group != "rewe"}
print(f"inference parameters equal: {inference == reports[PLAIN].groups}")
print(f"ReWE head: {reports[REWE].groups['rewe']:,} = d_h·u + u + u·m + m = "
      f"{SIZE}·{REWE_UNITS} + {REWE_UNITS} + {REWE_UNITS}·{SIZE} + {SIZE}")

# %% [markdown]
# ## 3. Train both for the same steps with `model.fit`
# Same batches in the same order (seeded pipelines), same optimizer and steps.
# Keras tracks each output's loss separately: `logits_loss` (the NLL; here with
# label smoothing) and `rewe_loss` (the cosine loss before λ), and `val_` ones
# from the evaluation step — the curves of the paper's Figure 3. With
# `keras.callbacks.TensorBoard` they are separate scalars as well. Each step's
# `loss` is `logits_loss + λ·rewe_loss`; over an epoch Keras averages `loss`
# per sentence but the per-output losses per batch, so with batches of
# different sizes the epoch means add up only approximately.

# %%
print("=== TRAINING ===")
results = {}
for name, m in models.items():
    tokenizer, _ = data.load_tokenizers(RUN_DIR)
    batches = data.dataset_from_corpus(train, tokenizer, tokenizer, batch_tokens=BATCH_TOKENS,
                                       repeat=True, seed=1)
    dev_batches = data.dataset_from_corpus(dev, tokenizer, tokenizer, batch_tokens=BATCH_TOKENS)
    # A known length: Keras then ends each evaluation without an "ran out of data" warning.
    count = int(dev_batches.reduce(0, lambda n, _: n + 1))
    dev_batches = dev_batches.apply(tf.data.experimental.assert_cardinality(count))
    m.fit(batches, steps_per_epoch=2, epochs=1, verbose=0)  # tracing, not timed
    start = time.perf_counter()
    history = m.fit(batches, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS,
                    validation_data=dev_batches, verbose=2).history
    seconds = (time.perf_counter() - start) / (STEPS_PER_EPOCH * EPOCHS)
    results[name] = {"seconds_per_step": seconds,
                     "history": {k: [round(v, 4) for v in values] for k, values in history.items()}}
    print(f"[{name}] history: {results[name]['history']}")

# %% [markdown]
# ## 4. Translate and score
# Decoding uses only the categorical head (`model.make_step_fn`): the ReWE model
# translates exactly as a plain model with its weights would.

# %%
for name, m in models.items():
    tokenizer, _ = data.load_tokenizers(RUN_DIR)
    hypotheses = Translator(m, tokenizer, tokenizer).translate(dev.sources)
    results[name]["bleu"] = corpus_bleu(hypotheses, dev.targets)
    results[name]["example"] = hypotheses[0]

print("=== RESULTS ===")
print(f"ES : {dev.sources[0]}\nREF: {dev.targets[0]}")
for name, result in results.items():
    print(f"{name:5s}: {result['example']}")
for name, result in results.items():
    history = result["history"]
    nll = history["logits_loss"] if name == REWE else history["loss"]
    print(f"[{name}] {result['seconds_per_step'] * 1000:.0f} ms/step, NLL per epoch {nll}, "
          f"dev BLEU {result['bleu'].score:.2f}")
rewe_history = results[REWE]["history"]
print(f"[{REWE}] ReWE loss per epoch {rewe_history['rewe_loss']}, "
      f"val {rewe_history['val_rewe_loss']}")
print(f"time per step, ReWE / plain: "
      f"{results[REWE]['seconds_per_step'] / results[PLAIN]['seconds_per_step']:.2f}x")

# %% [markdown]
# ## 5. Regressing pretrained vectors instead
# The paper regresses pretrained fastText vectors (its decoder embedding was
# initialised from them). `targets="pretrained"` gives the head a frozen
# `(V, m)` table, saved with the model's weights; here FastText vectors trained
# on the target side with the model's own pieces (`data.train_word_vectors`,
# nothing to download). `compile_for_translation` builds the same two-output
# compile with the paper's λ = 20 and cosine loss by default.

# %%
tokenizer, _ = data.load_tokenizers(RUN_DIR)
vectors_path = data.train_word_vectors(train.targets, tokenizer,
                                       os.path.join(RUN_DIR, "target_vectors.vec"),
                                       dim=VECTOR_DIM, epochs=3 if TINY else 5, seed=SEED)
words, vectors = data.load_word_vectors(vectors_path)
table = data.target_embedding_table(tokenizer, words, vectors, seed=SEED)
keras.utils.set_random_seed(SEED)
pretrained = LSTMSeq2Seq(vocab_size, vocab_size, embedding_dim=SIZE, hidden_dim=SIZE,
                         num_layers=1, bidirectional_encoder=True, dropout=0.1, head="tied",
                         rewe={"hidden_dim": REWE_UNITS, "targets": "pretrained",
                               "embedding_dim": VECTOR_DIM})
pretrained.rewe.set_target_vectors(table.vectors)
compile_for_translation(pretrained, learning_rate=LEARNING_RATE, label_smoothing=0.1)
tokenizer, _ = data.load_tokenizers(RUN_DIR)
batches = data.dataset_from_corpus(train, tokenizer, tokenizer, batch_tokens=BATCH_TOKENS,
                                   repeat=True, seed=1)
history = pretrained.fit(batches, steps_per_epoch=STEPS_PER_EPOCH, epochs=1, verbose=0).history
print("=== PRETRAINED TARGETS ===")
print(f"table {tuple(pretrained.rewe.target_vectors().shape)}, trainable: "
      f"{pretrained.rewe.target_table.trainable}; ReWE loss after {STEPS_PER_EPOCH} steps "
      f"{history['rewe_loss'][0]:.4f}, NLL {history['logits_loss'][0]:.4f}")

# %% [markdown]
# ## 6. Save and reload
# A `.keras` file keeps the ReWE head (config and weights, the pretrained table
# too) and the two-output compile; the reloaded model translates with the
# categorical head only.

# %%
path = os.path.join(RUN_DIR, "rewe.keras")
models[REWE].save(path)
reloaded = keras.saving.load_model(path, safe_mode=True)
print("=== SAVED MODEL ===")
same = np.allclose(reloaded(inputs), models[REWE](inputs), atol=1e-6)
print(f"reloaded: ReWE head {type(reloaded.rewe).__name__} ({reloaded.rewe.targets}), "
      f"compiled losses {sorted(reloaded.loss)}, same logits: {same}")

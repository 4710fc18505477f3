# %% [markdown]
# # Continuous outputs: predicting word vectors with the von Mises–Fisher loss
#
# Kumar & Tsvetkov (2019) drop the softmax: the decoder predicts a *vector*
# ê ∈ R^m per target position, trained with the von Mises–Fisher negative
# log-likelihood of the gold word's pretrained, frozen, unit-norm vector e(w):
#
#     NLLvMF(ê; e) = −log C_m(‖ê‖) − λ2·ê·e + λ1·‖ê‖       (λ1 = 0.02, λ2 = 0.1)
#
# The output layer is a `d_h → m` map (`d_h·m + m` parameters) instead of a
# `(|V|, d_h)` softmax matrix, and decoding is a nearest-neighbour search over
# the target vectors. `tf_outheads.ContinuousOutputHead` is that output layer
# and `tf_outheads.VMFLoss` the loss (exact log C_m, `tf_outheads.ops`).
#
# This tutorial, on the embedded Spanish→English Bible corpus: trains target
# vectors (fastText on the target side, with the model's own SentencePiece
# pieces: nothing can be downloaded here), lays them out as the target table
# (special vectors for `<unk>`, `</s>`, ...), trains an attentional LSTM with the
# vMF head and the same model with a tied softmax, from the same seed for the
# same steps with `model.fit`, and compares time per step, output-layer
# parameters and dev BLEU with greedy (nearest-neighbour) and beam-search
# decoding.
#
# Run it as a script (`python tutorials/04_continuous_outputs.py`, about fifteen
# minutes on a 2-core CPU) or open it as a notebook (percent format).
# `VMF_TUTORIAL_TINY=1` shrinks every setting so the test suite can execute it
# in about a minute; its BLEU and neighbours mean nothing then.

# %%
import os
import tempfile
import time

import keras
import numpy as np

from tf_outheads import (Translator, VMFLoss, compile_for_translation, corpus_bleu, data,
                         parameter_report)
from tf_outheads_zoo import LSTMSeq2Seq
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS

TINY = os.environ.get("VMF_TUTORIAL_TINY") == "1"
RUN_DIR = os.environ.get("VMF_TUTORIAL_RUN_DIR") or tempfile.mkdtemp(prefix="vmf-")
SEED = 1234

# Every size in one place: (tiny test setting, CPU setting as the lstm-cpu-vmf preset).
VOCAB_SIZE = 600 if TINY else 4000     # SentencePiece pieces, per language
SIZE = 32 if TINY else 256             # embedding = hidden size d = d_h
DIM = 32 if TINY else 300              # m, the word vectors' size (the papers: 300)
VECTOR_EPOCHS = 3 if TINY else 5       # fastText passes over the target side
STEPS_PER_EPOCH, EPOCHS = (8, 2) if TINY else (300, 2)
BATCH_TOKENS = 1024 if TINY else 2048
LEARNING_RATE = 3e-3 if TINY else 5e-3
BEAM_SIZE = 4

# %% [markdown]
# ## 1. Corpus and tokenizers
# The SWORD export of the World English Bible appends a Psalm heading to
# thousands of verses; `strip_suffixes` removes it from the targets. Separate
# SentencePiece models per side: with a joint vocabulary, Spanish-only pieces
# would be target ids without an English vector.

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
source_model = data.train_sentencepiece(train.sources, os.path.join(RUN_DIR, "spm_source"),
                                        VOCAB_SIZE, seed=SEED)
target_model = data.train_sentencepiece(train.targets, os.path.join(RUN_DIR, "spm_target"),
                                        VOCAB_SIZE, seed=SEED)


def load_tokenizers():
    return data.SubwordTokenizer(source_model), data.SubwordTokenizer(target_model)


source_tokenizer, target_tokenizer = load_tokenizers()
print(f"{len(train)} training pairs; vocabularies: source {source_tokenizer.vocab_size}, "
      f"target {target_tokenizer.vocab_size}")

# %% [markdown]
# ## 2. Target vectors
# `train_word_vectors` trains gensim fastText (skip-gram) on the target side,
# split into the target tokenizer's pieces, and writes a `.vec` file: one
# vector per piece (e.g. `▁God`), so row `i` of the table belongs to id `i`.
# `target_embedding_table` lays them out in id order, L2-normalised, and gives
# the special ids deliberate vectors (results are very sensitive to the `</s>`
# and `<unk>` vectors): `<pad>` zeros; `<unk>` the mean direction of words the
# vector file has but the vocabulary lacks, or, when there are none (as here), a
# seeded random unit vector far from every word, like those of `</s>` and `<s>`.

# %%
start = time.perf_counter()
vectors_path = data.train_word_vectors(train.targets, target_tokenizer,
                                       os.path.join(RUN_DIR, "target_vectors.vec"),
                                       dim=DIM, epochs=VECTOR_EPOCHS, seed=SEED)
words, vectors = data.load_word_vectors(vectors_path)
table = data.target_embedding_table(target_tokenizer, words, vectors, seed=SEED)
print(f"=== TARGET TABLE === ({len(words)} vectors trained in "
      f"{time.perf_counter() - start:.1f} s)")
print(table)
print(f"counts: {table.counts}")

# %% [markdown]
# ## 3. Nearest neighbours under the trained vectors
# Cosine similarity between unit rows; special ids and pieces without a vector
# left out. With a few epochs on one book these are rough, but frequent
# pieces already have sensible neighbours.

# %%
FIRST_WORD_ID = data.EOS_ID + 1  # ids below are PAD, UNK, BOS, EOS
pieces = [target_tokenizer.id_to_piece(i) for i in range(target_tokenizer.vocab_size)]


def nearest(query_id, k=5):
    similarity = table.vectors @ table.vectors[query_id]
    similarity[~table.has_vector] = -np.inf
    similarity[query_id] = -np.inf
    return [pieces[i] for i in np.argsort(-similarity)[:k]]


wanted = ["▁God", "▁king", "▁said", "▁water", "▁land"]
queries = [p for p in wanted if target_tokenizer.piece_to_id(p) != data.UNK_ID
           and table.has_vector[target_tokenizer.piece_to_id(p)]]
for piece in pieces[FIRST_WORD_ID:]:  # fallback: early (frequent) whole-word pieces
    if len(queries) >= 4:
        break
    if piece.startswith("▁") and len(piece) > 3 and piece not in queries:
        queries.append(piece)
print("=== NEAREST NEIGHBOURS (trained target vectors, top-5 by cosine) ===")
width = max(len(q) for q in queries)
for query in queries:
    print(f"{query:{width}s} | {' '.join(nearest(target_tokenizer.piece_to_id(query)))}")

# %% [markdown]
# ## 4. Two models, one seed: vMF head vs tied softmax
# `head={"class_name": "continuous", "config": {"output_dim": m}}` builds a
# `ContinuousOutputHead`; `set_target_vectors` puts the table in its frozen
# weight (saved with the model's weights). `VMFLoss` reads the table from the
# head. The baseline is the zoo's: a tied softmax with label smoothing 0.1.

# %%
VMF = "vMF"
SOFTMAX = "softmax"


def build_model(name):
    keras.utils.set_random_seed(SEED)  # same initial weights outside the head
    head = {"class_name": "continuous", "config": {"output_dim": DIM}} if name == VMF else "tied"
    model = LSTMSeq2Seq(source_tokenizer.vocab_size, target_tokenizer.vocab_size,
                        embedding_dim=SIZE, hidden_dim=SIZE, num_layers=1,
                        bidirectional_encoder=True, dropout=0.1, head=head)
    if name == VMF:
        model.head.set_target_vectors(table.vectors)
        compile_for_translation(model, learning_rate=LEARNING_RATE,
                                loss=VMFLoss(norm_penalty=0.02, dot_scale=0.1))
    else:
        compile_for_translation(model, learning_rate=LEARNING_RATE, label_smoothing=0.1)
    return model


models = {name: build_model(name) for name in (VMF, SOFTMAX)}
print("=== OUTPUT LAYERS ===")
for name, model in models.items():
    params = parameter_report(model)
    trainable = params.trainable_groups["output_layer"]
    frozen = params.groups["output_layer"] - trainable
    print(f"[{name}] {params.total:,} parameters in all; output layer: {trainable:,} trainable, "
          f"{frozen:,} frozen; capacity {model.head.output_capacity()['equation']}")
d_h, m = SIZE, DIM
vmf_trainable = parameter_report(models[VMF]).trainable_groups["output_layer"]
print(f"vMF output layer: {vmf_trainable:,} trainable = d_h·m + m = {d_h}·{m} + {m} "
      f"= {d_h * m + m:,}; the {target_tokenizer.vocab_size}×{m} target table is frozen")

# %% [markdown]
# ## 5. Train both for the same steps with `model.fit`; translate; score
# Same batches in the same order (seeded pipelines), same optimizer and steps.
# Greedy decoding of the vMF model is nearest-neighbour decoding: its head
# scores words by `log softmax(ê·e(w))`, whose arg-max is the word whose vector
# has the largest cosine with ê. Beam search uses the same scores.

# %%
# `set_random_seed` (in build_model) frees the SentencePiece ops of tokenizers
# built before it: load them again before each pipeline.
results = {}
for name, model in models.items():
    source_tokenizer, target_tokenizer = load_tokenizers()
    batches = data.dataset_from_corpus(train, source_tokenizer, target_tokenizer,
                                       batch_tokens=BATCH_TOKENS, repeat=True, seed=1)
    print(f"=== TRAINING [{name}] ===")
    model.fit(batches, steps_per_epoch=2, epochs=1, verbose=0)  # tracing, not timed
    start = time.perf_counter()
    history = model.fit(batches, steps_per_epoch=STEPS_PER_EPOCH, epochs=EPOCHS, verbose=2)
    seconds = (time.perf_counter() - start) / (STEPS_PER_EPOCH * EPOCHS)
    hypotheses = {}
    for decoding, beam_size in (("greedy", 1), (f"beam {BEAM_SIZE}", BEAM_SIZE)):
        translator = Translator(model, source_tokenizer, target_tokenizer, beam_size=beam_size)
        hypotheses[decoding] = translator.translate(dev.sources)
    results[name] = {
        "seconds_per_step": seconds,
        "loss": [round(v, 3) for v in history.history["loss"]],
        "output_layer": parameter_report(model).trainable_groups["output_layer"],
        "hypotheses": hypotheses,
        "bleu": {k: corpus_bleu(h, dev.targets) for k, h in hypotheses.items()},
    }

print("=== EXAMPLES ===")
for index in range(2):
    print(f"ES : {dev.sources[index]}\nREF: {dev.targets[index]}")
    for name, result in results.items():
        for decoding, hypotheses in result["hypotheses"].items():
            print(f"{name} {decoding}: {hypotheses[index]}")
    print()

print("=== RESULTS ===")
for name, result in results.items():
    print(f"[{name}] {result['seconds_per_step'] * 1000:.0f} ms/step, training loss per epoch "
          f"{result['loss']}, output layer {result['output_layer']:,} trainable parameters")
for name, result in results.items():
    for decoding, bleu in result["bleu"].items():
        print(f"[{name}] {decoding} BLEU {bleu.score:.2f}")
vmf, softmax = results[VMF], results[SOFTMAX]
print(f"time per step, softmax / vMF: {softmax['seconds_per_step'] / vmf['seconds_per_step']:.2f}x "
      f"(the losses differ, so compare BLEU, not loss values)")

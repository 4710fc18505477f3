# %% [markdown]
# # Quickstart: train an attentional LSTM translator, translate, score with BLEU
#
# The Python path behind `tf-outheads train`: read the embedded Spanish→English
# Bible corpus, clean it, train a SentencePiece model, batch by token budget,
# build the LSTM encoder–decoder with a tied output layer, `model.fit`, translate
# the dev set greedily and score it with sacrebleu.
#
# Run it as a script (`python tutorials/01_quickstart.py`) or open it as a
# notebook (percent format, e.g. with Jupytext). `QUICKSTART_TINY=1` shrinks every
# setting so the test suite can execute it in well under a minute.

# %%
import os
import tempfile

import keras

from tf_outheads import compile_for_translation, corpus_bleu, data, parameter_report, translate
from tf_outheads_zoo import LSTMSeq2Seq
from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, EMBEDDED_CORPUS

TINY = os.environ.get("QUICKSTART_TINY") == "1"
RUN_DIR = os.environ.get("QUICKSTART_RUN_DIR") or tempfile.mkdtemp(prefix="quickstart-")
keras.utils.set_random_seed(1234)

# %% [markdown]
# ## 1. Read and clean the corpus
# `read_tsv` picks the columns and the split; bad lines raise an error naming the
# file and line. The WEB export appends stray Psalm headings to thousands of
# verses (see `tf_outheads_zoo/data/README.md`): `strip_suffixes` removes them, counted.
# `clean` reports how many pairs each filter removed.

# %%
train = data.read_tsv(EMBEDDED_CORPUS, source="es", target="en_web",
                      references=("en_kjv",), split="train")
dev = data.read_tsv(EMBEDDED_CORPUS, source="es", target="en_web",
                    references=("en_kjv",), split="dev")
if TINY:
    train, dev = train.select(range(1500)), dev.select(range(40))
train, stripped = data.strip_suffixes(train, BIBLE_WEB_ARTIFACTS)
dev, _ = data.strip_suffixes(dev, BIBLE_WEB_ARTIFACTS)
print("stripped headings:", stripped)
train, report = data.clean(train, max_length=60 if TINY else 100, max_length_ratio=2.5,
                           drop_containing=BIBLE_WEB_ARTIFACTS)
print(report)

# %% [markdown]
# ## 2. Subword tokenizer, trained once and cached in the run directory
# The same SentencePiece model tokenizes in-graph (tensorflow-text) for training,
# decoding and, later, the exported model.

# %%
source_tokenizer, target_tokenizer = data.build_tokenizers(
    train.sources, train.targets, RUN_DIR, vocab_size=600 if TINY else 8000, joint=True)
print(source_tokenizer.decode_to_text(source_tokenizer.tokenize(train.sources[:1]))[0])

# %% [markdown]
# ## 3. Batches with a token budget
# Each batch holds at most `batch_tokens` padded tokens per side
# (`{"source_ids", "target_in"}`, `target_out`), length-bucketed and shuffled.

# %%
batches = data.dataset_from_corpus(train, source_tokenizer, target_tokenizer,
                                   batch_tokens=1024 if TINY else 6144, repeat=True, seed=1)

# %% [markdown]
# ## 4. The model: any head plugs in
# `head="tied"` reuses the target input embedding as output weights;
# `head="softmax"` is the untied layer.

# %%
size = 48 if TINY else 256
model = LSTMSeq2Seq(source_tokenizer.vocab_size, target_tokenizer.vocab_size,
                    embedding_dim=size, hidden_dim=size, num_layers=1,
                    bidirectional_encoder=True, dropout=0.1 if TINY else 0.2, head="tied")
compile_for_translation(model, learning_rate=3e-3 if TINY else 2e-3, label_smoothing=0.1)
print(parameter_report(model))

# %% [markdown]
# ## 5. Train with `model.fit`

# %%
history = model.fit(batches, steps_per_epoch=15 if TINY else 300, epochs=2 if TINY else 4,
                    verbose=2)
losses = history.history["loss"]
print("loss per epoch:", [round(v, 3) for v in losses])

# %% [markdown]
# ## 6. Translate and score
# Greedy decoding stops each sentence at its EOS; BLEU is sacrebleu on
# detokenized text, against one reference and against two.

# %%
hypotheses = translate(model, dev.sources, source_tokenizer, target_tokenizer)
for source, hypothesis, reference in list(zip(dev.sources, hypotheses, dev.targets))[:3]:
    print(f"ES : {source}\nHYP: {hypothesis}\nREF: {reference}\n")
bleu = corpus_bleu(hypotheses, dev.targets)
multi = corpus_bleu(hypotheses, [dev.targets, dev.references["en_kjv"]])
print(bleu.text, "|", bleu.signature)
print(multi.text, "|", multi.signature)

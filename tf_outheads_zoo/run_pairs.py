"""Shared-private embeddings in zoo runs: the word pairs of a run, and the
paper's Figure 6 (a 2-D PCA of paired source and target embeddings).

A preset asks for shared-private embeddings with
`model.shared_private = {"pairs": "auto", "threshold": 0.05, "sharing_ratios": [...]}`;
`"auto"` builds the pairs from the run's training split with its tokenizers
(eflomal alignments, `tf_outheads.data.word_pairs_from_tokenizers`) and writes
them to `<run>/word_pairs.tsv`, which later runs in the same directory reuse
when the tokenizers are the same.
"""

import dataclasses
import hashlib
import os

import numpy as np

from tf_outheads.data.tokenizer import corpus_fingerprint
from tf_outheads.data.word_pair_table import CATEGORIES
from tf_outheads.data.word_pair_table import WordPairs
from tf_outheads.data.word_pairs import word_pairs_from_tokenizers
from tf_outheads_zoo.plots import write_paired_embedding_plot

PAIRS_FILE = "word_pairs.tsv"
FIGURE_FILE = "paired_embeddings_pca.svg"


def _fingerprint(train, source_tokenizer, target_tokenizer, threshold):
    """What the pairs depend on: the training texts (the tokenizer cache's own
    fingerprint of them), both SentencePiece models and the threshold."""
    digest = hashlib.sha256(corpus_fingerprint(train.sources, train.targets).encode())
    for part in (source_tokenizer.model_proto, target_tokenizer.model_proto,
                 repr(threshold).encode()):
        digest.update(part)
    return digest.hexdigest()


def _read(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def resolve_pairs(model_config, train, source_tokenizer, target_tokenizer, run_dir, log=print):
    """Returns `model_config` with `shared_private.pairs = "auto"` replaced by the
    path of the run's pairs file (built, or reused when its fingerprint matches),
    and `"identity"` by every piece paired with itself (three-way tying; needs
    a joint vocabulary). Other values pass through; `threshold` is dropped.

    Args:
        model_config: the run's `ModelConfig` (`RunConfig.model`; a copy is returned).
        train: `ParallelCorpus`, the training split.
        source_tokenizer, target_tokenizer: the run's `SubwordTokenizer`s.
        run_dir: str. Where `word_pairs.tsv` lives.

    Raises:
        ValueError: a `shared_private` entry that is not a dict, or
            `"identity"` with separate vocabularies.
        tf_outheads.data.PairingError: a threshold outside [0, 1).
    """
    spec = model_config.shared_private
    if spec is None:
        return model_config
    if not isinstance(spec, dict):
        raise ValueError("`model.shared_private` must be a dict with 'pairs'. "
                         f"Received: {spec!r}")
    spec = dict(spec)
    threshold = spec.pop("threshold", 0.05)
    if spec.get("pairs") == "identity":  # three-way weight tying
        if source_tokenizer.model_proto != target_tokenizer.model_proto:
            raise ValueError("`shared_private.pairs = 'identity'` (three-way weight tying) "
                             "needs a joint vocabulary: set data.joint_vocabulary = True.")
        pairs = WordPairs.identity(source_tokenizer.vocab_size)
        return dataclasses.replace(model_config,
                                   shared_private={**spec, "pairs": pairs.get_config()})
    if spec.get("pairs") != "auto":
        return dataclasses.replace(model_config, shared_private=spec)
    path = os.path.join(run_dir, PAIRS_FILE)
    stamp = path + ".fingerprint"
    fingerprint = _fingerprint(train, source_tokenizer, target_tokenizer, threshold)
    if os.path.exists(path) and _read(stamp) == fingerprint:
        log(f"Word pairs: reusing {path}")
    else:
        pairs = word_pairs_from_tokenizers(train.sources, train.targets, source_tokenizer,
                                           target_tokenizer, threshold=threshold, log=log)
        pairs.save(path)
        with open(stamp, "w", encoding="utf-8") as f:
            f.write(fingerprint + "\n")
        log(f"Word pairs written to {path}")
    return dataclasses.replace(model_config, shared_private={**spec, "pairs": path})


def figure_pairs(pairs, count=40, min_length=3):
    """Indices of the pairs Figure 6 shows: the first `count` lexical-meaning
    pairs in pairing order (most frequent source words first) whose two
    tokens are words of at least `min_length` letters."""
    def wordlike(token):
        token = token.lstrip("▁")
        return len(token) >= min_length and token.isalpha()

    chosen = []
    for index in np.flatnonzero(pairs.categories == CATEGORIES.index("lm")):
        source = pairs.source_tokens[pairs.source_ids[index]]
        target = pairs.target_tokens[pairs.target_ids[index]]
        if wordlike(source) and wordlike(target):
            chosen.append(index)
            if len(chosen) == count:
                break
    return np.array(chosen, dtype=np.int64)


def write_pair_figure(model, pairs, path, count=40, title=None):
    """Figure 6 for `model`: its source and target embedding rows of the
    `figure_pairs` of `pairs`, projected together by PCA.

    Works for any model with `source_embedding` and `target_embedding`, so a
    vanilla run plotted with a shared-private run's pairs gives Figure 6(a).

    Returns:
        `path`, or `None` when the pairs carry no tokens or hold fewer than
        two plottable lexical pairs.
    """
    if isinstance(pairs, (str, os.PathLike)):
        pairs = WordPairs.load(pairs)
    if pairs.source_tokens is None:
        return None
    chosen = figure_pairs(pairs, count)
    if len(chosen) < 2:
        return None
    source_ids, target_ids = pairs.source_ids[chosen], pairs.target_ids[chosen]
    source = np.asarray(model.source_embedding.embeddings)[source_ids]
    target = np.asarray(model.target_embedding.embeddings)[target_ids]
    return write_paired_embedding_plot(
        path, source, target,
        [pairs.source_tokens[i].lstrip("▁") for i in source_ids],
        [pairs.target_tokens[i].lstrip("▁") for i in target_ids],
        title=title or f"PCA of {len(chosen)} paired embeddings (Liu et al. 2019, Fig. 6)")

"""Vocabulary selection: decode over a per-batch subset of the target vocabulary (issue 56).

At the vocabulary sizes the papers use, each decoding step's output projection
(`d × V` per hypothesis, and a joint head's `E′` rows) outweighs the rest of the
step. A `Shortlist` names, for each source piece, the target pieces it is likely to
produce (from word alignments of the training corpus: `build_shortlist`), plus the
most frequent target pieces; a batch decodes over their union only:

    candidates = sorted(specials ∪ frequent ∪ ⋃ translations[source pieces of the batch]
                        ∪ prefix pieces), padded with the next most frequent pieces to a
                        multiple of `bucket` (so a traced search is reused)
    step:  h_t → scores over the candidates (`head.inference_cache()` columns, gathered
           once per batch: `select_cache`) → the search picks a candidate index
           → its piece id feeds the next step

The candidates are sorted and always hold `<pad>`, `<unk>`, `<s>`, `</s>` (ids 0–3), so
those four keep their ids in candidate space: the searches, their EOS handling, EOS
bias and repeat blocking work unchanged on candidate indices, and the ids are mapped
back (`to_vocabulary_ids`) before the texts. A selection that holds every piece
decodes exactly as without it.

References:
    Domhan et al. 2022, "The Devil is in the Details: On the Pitfalls of Vocabulary
    Selection in Neural Machine Translation"; Marian's lexical shortlists.
"""

import collections
import dataclasses
import json
import os

import numpy as np
import tensorflow as tf

from tf_outheads.data.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
SHORTLIST_FILE = "shortlist.npz"
DEFAULT_BUCKET = 64


def select_cache(cache, candidate_ids):
    """`inference_cache()` restricted to `candidate_ids (K,)`: every entry's last axis is
    the target vocabulary (output kernel `(d_o, V)`, bias `(V,)`, int8 scales `(V,)`, a
    continuous head's table `(m, V)`), gathered once per batch, so a step scores `K`
    words instead of `V`."""
    return {key: tf.gather(value, candidate_ids, axis=tf.rank(value) - 1)
            for key, value in cache.items()}


def selected_step_fn(model, cache, candidate_ids):
    """The model's step function over `candidate_ids` only: it takes and scores candidate
    indices (`ids_t` in `[0, K)`), feeding the decoder their piece ids."""
    head_select = getattr(model.head, "select_cache", None)
    selected = head_select(cache, candidate_ids) if head_select else select_cache(
        cache, candidate_ids)
    step_fn = model.make_step_fn(selected)

    def candidate_step_fn(ids_t, state):
        return step_fn(tf.gather(candidate_ids, ids_t), state)

    return candidate_step_fn


def to_candidate_indices(candidate_ids, ids):
    """Piece ids (each among `candidate_ids`, sorted) → their candidate indices."""
    ids = tf.cast(ids, tf.int32)
    flat = tf.searchsorted(candidate_ids, tf.reshape(ids, [-1]))
    return tf.reshape(flat, tf.shape(ids))


def to_vocabulary_ids(candidate_ids, indices):
    """Candidate indices (any shape) → piece ids (`<pad>`, index 0, stays 0)."""
    return tf.gather(candidate_ids, indices)


@dataclasses.dataclass(frozen=True, eq=False)
class Shortlist:
    """A lexical shortlist: per source piece the target pieces it may produce.

    Attributes:
        translations: int32 `(V_src, k)`: row `s` holds the `k` target pieces most
            often aligned to source piece `s` (padded with `</s>`).
        frequent: int32 `(N,)`: the `N` most frequent target pieces, always in.
        order: int32 `(V_tgt,)`: every target piece, most frequent first (bucket
            padding takes the next ones).
        source_fingerprint, target_fingerprint: str, the tokenizers' fingerprints
            (`SubwordTokenizer.fingerprint`): a shortlist for other pieces is refused.
        bucket: int, candidate counts are rounded up to a multiple of it.
    """

    translations: np.ndarray
    frequent: np.ndarray
    order: np.ndarray
    source_fingerprint: str = ""
    target_fingerprint: str = ""
    bucket: int = DEFAULT_BUCKET

    def __post_init__(self):
        translations = np.asarray(self.translations, dtype="int32")
        order = np.asarray(self.order, dtype="int32")
        frequent = np.asarray(self.frequent, dtype="int32")
        size = order.size
        if translations.ndim != 2 or translations.shape[1] < 1:
            raise ValueError("`translations` must be (source vocabulary, k >= 1). Received: "
                             f"shape {translations.shape}")
        if sorted(order.tolist()) != list(range(size)):
            raise ValueError(f"`order` must hold every target id 0..{size - 1} once")
        for name, ids in (("translations", translations), ("frequent", frequent)):
            if ids.size and (ids.min() < 0 or ids.max() >= size):
                raise ValueError(f"`{name}` holds ids outside the target vocabulary "
                                 f"(0..{size - 1}). Received: {ids.min()}..{ids.max()}")
        if isinstance(self.bucket, bool) or not isinstance(self.bucket, int) or self.bucket < 1:
            raise ValueError(f"`bucket` must be a positive int. Received: {self.bucket!r}")
        object.__setattr__(self, "translations", translations)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "frequent", frequent)

    @property
    def source_vocabulary_size(self):
        return int(self.translations.shape[0])

    @property
    def target_vocabulary_size(self):
        return int(self.order.size)

    @property
    def top_k(self):
        return int(self.translations.shape[1])

    def check_tokenizers(self, source_tokenizer, target_tokenizer, origin="the shortlist"):
        """Refuse tokenizers this shortlist was not built for (fingerprint, size)."""
        for side, tokenizer, size, fingerprint in (
                ("source", source_tokenizer, self.source_vocabulary_size,
                 self.source_fingerprint),
                ("target", target_tokenizer, self.target_vocabulary_size,
                 self.target_fingerprint)):
            if tokenizer is None:
                continue
            if tokenizer.vocab_size != size or (fingerprint and
                                                tokenizer.fingerprint != fingerprint):
                raise ValueError(
                    f"{origin} was built for another {side} vocabulary ({size} pieces, "
                    f"{fingerprint or 'no fingerprint'}); this model's {side} tokenizer has "
                    f"{tokenizer.vocab_size} ({tokenizer.fingerprint}). Build it again: "
                    "tf-outheads shortlist --run-dir RUN")

    # `candidates` reads the source pieces only (a `NeuralSelection` reads the model).
    reads_model = False

    def check(self, model, source_tokenizer=None, target_tokenizer=None):
        """Refuse a model or tokenizers this shortlist was not built for."""
        self.check_tokenizers(source_tokenizer, target_tokenizer)
        size = getattr(model, "target_vocabulary_size", self.target_vocabulary_size)
        if size != self.target_vocabulary_size:
            raise ValueError(f"The shortlist was built for {self.target_vocabulary_size} target "
                             f"pieces; the model has {size}")

    def describe(self):
        """What an export's metadata says of it."""
        return {"method": "lexical", "top_k": self.top_k, "frequent": len(self.frequent),
                "bucket": self.bucket}

    def candidates(self, source_ids, prefix_ids=None, probabilities=None):
        """The batch's candidate piece ids, sorted, int32 `(K,)` (TensorFlow ops).

        Args:
            source_ids: int `(B, S)`, padded with `<pad>`.
            prefix_ids: `None` or int `(B, P)`: target prefix pieces, always in.
            probabilities: unused (a `NeuralSelection`'s).
        """
        del probabilities
        size = self.target_vocabulary_size
        translations = tf.constant(self.translations)
        ids = [tf.reshape(tf.gather(translations, tf.cast(source_ids, tf.int32)), [-1]),
               tf.constant(self.frequent), tf.constant(SPECIAL_IDS, tf.int32)]
        if prefix_ids is not None:
            ids.append(tf.reshape(tf.cast(prefix_ids, tf.int32), [-1]))
        ids = tf.concat(ids, axis=0)
        chosen = tf.scatter_nd(ids[:, tf.newaxis], tf.ones_like(ids), [size]) > 0
        count = tf.reduce_sum(tf.cast(chosen, tf.int32))
        wanted = tf.minimum(size, -(-count // self.bucket) * self.bucket)
        order = tf.constant(self.order)
        padding = tf.boolean_mask(order, tf.logical_not(tf.gather(chosen, order)))
        padding = padding[:wanted - count]
        chosen = tf.tensor_scatter_nd_update(chosen, padding[:, tf.newaxis],
                                             tf.ones_like(padding, dtype=tf.bool))
        return tf.cast(tf.where(chosen)[:, 0], tf.int32)

    def save(self, path):
        """Write to `path` (`.npz`, written whole then renamed)."""
        # Imported here: tf_outheads.training imports the decoders (an import circle).
        from tf_outheads.training.backup import write_atomically

        meta = np.array(json.dumps({"source_fingerprint": self.source_fingerprint,
                                    "target_fingerprint": self.target_fingerprint,
                                    "bucket": self.bucket}))
        return write_atomically(os.fspath(path), lambda temporary: np.savez(
            temporary, translations=self.translations, frequent=self.frequent,
            order=self.order, meta=meta))

    @classmethod
    def load(cls, path):
        """Read a `save`d shortlist.

        Raises:
            ValueError: naming `path`, if it is not one.
        """
        path = os.fspath(path)
        try:
            with np.load(path, allow_pickle=False) as stored:
                meta = json.loads(str(stored["meta"]))
                return cls(stored["translations"], stored["frequent"], stored["order"],
                           meta.get("source_fingerprint", ""),
                           meta.get("target_fingerprint", ""),
                           int(meta.get("bucket", DEFAULT_BUCKET)))
        except (OSError, KeyError, ValueError, json.JSONDecodeError) as error:
            if isinstance(error, FileNotFoundError):
                raise
            raise ValueError(f"{path}: not a shortlist written by Shortlist.save "
                             f"({error})") from error


def build_shortlist(source_ids, target_ids, source_vocabulary_size, target_vocabulary_size,
                    links=None, top_k=50, frequent=100, bucket=DEFAULT_BUCKET,
                    source_fingerprint="", target_fingerprint=""):
    """A `Shortlist` from a tokenized parallel corpus.

    For each source piece, its `top_k` target pieces by `p(t|s)`: from alignment
    `links` (one list of `(source position, target position)` per pair, e.g.
    `tf_outheads.data.alignment_links.eflomal_links`), else from sentence
    co-occurrence (`p(t|s) ∝` the pairs holding both), which favours frequent pieces
    more; plus the `frequent` most frequent target pieces.

    Args:
        source_ids, target_ids: sequences of int sequences, the pairs' pieces.
        links: `None` or one link list per pair.
        top_k: int >= 1. frequent: int >= 0. bucket: int >= 1.

    Raises:
        ValueError: naming the argument, for `top_k` or `frequent` out of range,
            corpora of different lengths, or links outside their sentence.
    """
    for name, value, least in (("top_k", top_k, 1), ("frequent", frequent, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"`{name}` must be an int >= {least}. Received: {name}={value!r}")
    if len(source_ids) != len(target_ids):
        raise ValueError(f"{len(source_ids)} source and {len(target_ids)} target sentences: "
                         "one target per source")
    if links is not None and len(links) != len(source_ids):
        raise ValueError(f"{len(links)} link lists for {len(source_ids)} sentence pairs")
    counts = [collections.Counter() for _ in range(source_vocabulary_size)]
    target_counts = np.zeros(target_vocabulary_size, dtype="int64")
    for number, (source, target) in enumerate(zip(source_ids, target_ids)):
        np.add.at(target_counts, np.asarray(target, dtype="int64"), 1)
        if links is None:
            for s in set(source):
                counts[s].update(set(target))
            continue
        for link in links[number]:
            i, j = link
            if not (0 <= i < len(source) and 0 <= j < len(target)):
                raise ValueError(f"Links of sentence {number}: link {i}-{j} is outside the "
                                 f"sentence ({len(source)} source, {len(target)} target "
                                 "pieces)")
            counts[source[i]][target[j]] += 1
    translations = np.full((source_vocabulary_size, top_k), EOS_ID, dtype="int32")
    for s, row in enumerate(counts):
        best = [t for t, _ in sorted(row.items(), key=lambda item: (-item[1], item[0]))[:top_k]]
        translations[s, :len(best)] = best
    order = np.argsort(-target_counts, kind="stable").astype("int32")
    return Shortlist(translations, order[:frequent], order, source_fingerprint,
                     target_fingerprint, bucket)


__all__ = ["DEFAULT_BUCKET", "SHORTLIST_FILE", "SPECIAL_IDS", "Shortlist", "build_shortlist",
           "select_cache", "selected_step_fn", "to_candidate_indices",
           "to_vocabulary_ids"]

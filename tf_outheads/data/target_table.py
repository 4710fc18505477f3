"""Word vectors laid out as a continuous-output head's targets: the `TargetTable`.

A continuous-output decoder (vMF, cosine/MSE; Kumar & Tsvetkov 2019) and ReWE
(Jauregi Unanue et al. 2019) are trained against one fixed, unit-norm vector per
target id. :func:`target_embedding_table` takes the vectors of a file (trained by
:func:`tf_outheads.data.train_word_vectors` or any other, read by
:func:`tf_outheads.data.load_word_vectors`) and makes that table, in steps:

1. the file's rows are L2-normalised and put at the id of the piece they belong to
   (`_file_rows`);
2. optionally post-processed against hubs: centred, and the top principal
   components removed (`_postprocessor`; Mu & Viswanath 2018, Algorithm 1);
3. the special ids get deliberate vectors (`_unk_row`, `_eos_row`, and `<s>` a far
   unit vector): results are very sensitive to the EOS/UNK vectors (Boldt et al.,
   VIVO report, §2.3 and §4).

The reading and training of the vectors is :mod:`tf_outheads.data.word_vectors`.
"""

import dataclasses
import logging
import typing

import numpy as np

from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.special_tokens import UNK_ID

__all__ = ["TargetTable", "target_embedding_table"]

# The table's summary is logged where it was before the table had its own module.
logger = logging.getLogger("tf_outheads.data.word_vectors")

UNK_STRATEGIES = ("mean_of_missing", "mean_of_all", "far")
EOS_STRATEGIES = ("far", "file", "negative_period")

# Random draws tried for each of the `</s>` and `<s>` vectors; the one whose
# largest cosine with a vocabulary vector is smallest is kept.
_SPECIAL_CANDIDATES = 64
# Special ids, in the order the table describes them.
_SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)


@dataclasses.dataclass(repr=False)
class TargetTable:
    """Unit-norm target vectors in the tokenizer's id order.

    Built by :func:`target_embedding_table`.

    Args:
        vectors: float32 array `(vocab_size, dim)`. Row `i` is the target
            vector of id `i`: unit norm, except `<pad>` (zeros).
        has_vector: bool array `(vocab_size,)`. True where the row is the
            piece's own vector from the file; False for the special ids and
            for pieces without a vector (their row is the `<unk>` vector).
        counts: dict of str to int. `"vocabulary"` (rows), `"special"` (4),
            `"with_vector"` and `"without_vector"` (ordinary pieces, summing
            to `vocabulary - special`), `"file_words"`,
            `"file_words_outside_vocabulary"` (file words that are no piece
            of the tokenizer) and `"zero_vectors"` (vectors of norm 0 in the
            file, treated as missing).
        special: dict of str to str. For each special piece (`"<pad>"`,
            `"<unk>"`, `"<s>"`, `"</s>"`), how its row was made.
        postprocessing: str. What was done to the file's vectors before they
            became rows: `"L2-normalised"`, or the centring and the principal
            components removed first.
    """

    vectors: np.ndarray
    has_vector: np.ndarray
    counts: dict[str, int]
    special: dict[str, str]
    postprocessing: str = "L2-normalised"

    @property
    def vocab_size(self):
        """int. Number of rows."""
        return int(self.vectors.shape[0])

    @property
    def dim(self):
        """int. Vector size."""
        return int(self.vectors.shape[1])

    def __repr__(self):
        return (
            f"TargetTable(vocab_size={self.vocab_size}, dim={self.dim}, "
            f"with_vector={self.counts['with_vector']}, "
            f"without_vector={self.counts['without_vector']})"
        )

    def __str__(self):
        counts = self.counts
        lines = [
            f"{counts['vocabulary']} target ids, dim {self.dim}: "
            f"{counts['with_vector']} pieces with a vector, "
            f"{counts['without_vector']} without (given the <unk> vector), "
            f"{counts['special']} special",
            f"  vector file: {counts['file_words']} words, "
            f"{counts['file_words_outside_vocabulary']} outside the vocabulary, "
            f"{counts['zero_vectors']} of norm 0",
            f"  rows: {self.postprocessing}",
        ]
        lines.extend(f"  {piece}: {text}" for piece, text in self.special.items())
        return "\n".join(lines)


def _unit(vector):
    norm = np.linalg.norm(vector)
    if not norm > 1e-12:
        raise ValueError(
            "The word vectors average to zero, so the <unk> vector and the mean "
            "direction are undefined. Received: vectors whose mean has norm "
            f"{norm:.3g}"
        )
    return vector / norm


def _far_unit_vector(rng, against, vocabulary):
    """A seeded random unit vector orthogonal to `against`, far from every word.

    Draws `_SPECIAL_CANDIDATES` Gaussian vectors, removes their components
    along the orthonormal rows of `against`, and keeps the one whose largest
    cosine with a row of `vocabulary` (unit rows) is smallest.

    Returns:
        `(vector, largest_cosine)`.
    """
    dim = vocabulary.shape[1]
    candidates = rng.standard_normal((_SPECIAL_CANDIDATES, dim))
    candidates -= (candidates @ against.T) @ against
    candidates /= np.linalg.norm(candidates, axis=1, keepdims=True)
    largest = (candidates @ vocabulary.T).max(axis=1)
    best = int(np.argmin(largest))
    return candidates[best], float(largest[best])


def _orthonormal_rows(*vectors):
    # QR gives an orthonormal basis of their span (Gram-Schmidt, stably).
    basis, _ = np.linalg.qr(np.stack(vectors, axis=1))
    return basis.T


def _period_piece(piece_ids, has_vector):
    """The id of the full stop's piece (`"."`, else `"▁."`) if it has a vector."""
    for piece in (".", "▁."):
        index = piece_ids.get(piece)
        if index is not None and has_vector[index]:
            return index, piece
    return None, None


def _postprocessor(vocabulary, center, remove_components):
    """`(transform, text)`: the map applied to unit rows before they are renormalised.

    Centring subtracts the mean of the vocabulary's unit rows (each piece counts
    once); all-but-the-top (Mu & Viswanath 2018, Algorithm 1) then removes the
    centred rows' components along their top `remove_components` principal
    directions. `transform` applies the same map to any row (the vectors of words
    outside the vocabulary, the file's `</s>`) and L2-normalises the result.
    """
    if not center:
        return (lambda rows: rows), "L2-normalised"
    mean = vocabulary.mean(axis=0)
    components = np.zeros((0, vocabulary.shape[1]))
    text = (f"L2-normalised, centred (the mean of the {len(vocabulary)} vocabulary rows, "
            f"norm {np.linalg.norm(mean):.3f}, subtracted)")
    if remove_components:
        _, singular, right = np.linalg.svd(vocabulary - mean, full_matrices=False)
        components = right[:remove_components]
        share = float(np.sum(singular[:remove_components] ** 2) / np.sum(singular ** 2))
        text += (f", top {remove_components} principal component(s) removed "
                 f"({share:.1%} of the centred variance), L2-normalised again")
    else:
        text += ", L2-normalised again"

    def transform(rows):
        rows = rows - mean
        rows = rows - (rows @ components.T) @ components
        norms = np.linalg.norm(rows, axis=-1, keepdims=True)
        return rows / np.maximum(norms, 1e-12)

    return transform, text


def _checked_inputs(words, vectors, unk, eos, seed, center, remove_components):
    """`(words, vectors)` as a list and a float64 array, once every argument of
    :func:`target_embedding_table` but the tokenizer is checked."""
    if unk not in UNK_STRATEGIES:
        raise ValueError(f"`unk` must be one of {UNK_STRATEGIES}. Received: unk={unk!r}")
    if eos not in EOS_STRATEGIES:
        raise ValueError(f"`eos` must be one of {EOS_STRATEGIES}. Received: eos={eos!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int. Received: seed={seed!r}")
    if not isinstance(center, (bool, np.bool_)):
        raise ValueError(f"`center` must be a bool. Received: center={center!r}")
    if (isinstance(remove_components, bool)
            or not isinstance(remove_components, (int, np.integer)) or remove_components < 0):
        raise ValueError("`remove_components` must be an int >= 0. "
                         f"Received: remove_components={remove_components!r}")
    if remove_components and not center:
        raise ValueError("`remove_components` removes principal components of centred rows: "
                         "it needs `center=True`. Received: center=False, "
                         f"remove_components={remove_components}")
    words = list(words)
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != len(words) or vectors.shape[1] < 4:
        raise ValueError(
            f"`vectors` must have shape (len(words), dim) with dim >= 4 (room for "
            f"the mean, <unk>, </s> and <s> directions). Received: "
            f"vectors.shape={vectors.shape}, len(words)={len(words)}"
        )
    if not np.all(np.isfinite(vectors)):
        raise ValueError("`vectors` must be finite. Received: a NaN or infinite value")
    if remove_components > vectors.shape[1] - 4:
        raise ValueError(
            f"`remove_components` must leave room for the mean, <unk>, </s> and <s> "
            f"directions: at most dim - 4 = {vectors.shape[1] - 4}. "
            f"Received: remove_components={remove_components}")
    return words, vectors


class _FileRows(typing.NamedTuple):
    """A vector file laid out in a tokenizer's id order (step 1, before post-processing)."""

    table: np.ndarray  # (vocab_size, dim): a piece's unit file row, zeros where none
    has_vector: np.ndarray  # (vocab_size,) bool: ordinary pieces with a non-zero file row
    unit_vectors: np.ndarray  # (len(words), dim): the file's rows, unit norm (zero rows stay 0)
    nonzero: np.ndarray  # (len(words),) bool: file rows of non-zero norm
    outside: list  # indices of the non-zero file rows of words that are no piece
    file_eos: np.ndarray | None  # the unit file row of the `</s>` piece, if any


def _file_rows(vocab_size, piece_ids, words, vectors):
    """Puts each file row, L2-normalised, in a `(vocab_size, dim)` table at the id
    `piece_ids` gives its word (an exact match of the piece text). Rows of norm 0
    count as missing; the file's rows for the special pieces are left out (but
    `</s>`'s is kept aside, for `eos="file"`).

    Raises:
        ValueError: if no ordinary piece gets a non-zero row.
    """
    norms = np.linalg.norm(vectors, axis=1)
    nonzero = norms > 0
    unit_vectors = np.zeros_like(vectors)
    unit_vectors[nonzero] = vectors[nonzero] / norms[nonzero, None]

    table = np.zeros((vocab_size, vectors.shape[1]))
    has_vector = np.zeros(vocab_size, dtype=bool)
    outside = []
    file_eos = None
    for row, word in enumerate(words):
        index = piece_ids.get(word)
        if index is None:
            if nonzero[row]:
                outside.append(row)
        elif index not in _SPECIAL_IDS and nonzero[row]:
            table[index] = unit_vectors[row]
            has_vector[index] = True
        elif index == EOS_ID and nonzero[row]:
            file_eos = unit_vectors[row]
    if not has_vector.any():
        raise ValueError(
            f"No ordinary piece of the tokenizer ({vocab_size} ids) has a non-zero "
            f"vector among the {len(words)} words; were the vectors trained with "
            f"this tokenizer? Received: words[:5]={words[:5]}"
        )
    return _FileRows(table, has_vector, unit_vectors, nonzero, outside, file_eos)


def _unk_row(unk, rows, transform, vocabulary, mean_direction, rng):
    """`(vector, text)` of `<unk>` by the `unk` strategy (see
    :func:`target_embedding_table`); `text` says how it was made."""
    if unk == "mean_of_missing" and rows.outside:
        unk_vector = _unit(transform(rows.unit_vectors[rows.outside]).mean(axis=0))
        unk_text = (
            f"normalised mean of the {len(rows.outside)} file vectors of words outside "
            f"the vocabulary"
        )
    elif unk == "mean_of_all":
        unk_vector = _unit(transform(rows.unit_vectors[rows.nonzero]).mean(axis=0))
        unk_text = f"normalised mean of all {int(rows.nonzero.sum())} file vectors"
    else:
        unk_vector, unk_cosine = _far_unit_vector(
            rng, _orthonormal_rows(mean_direction), vocabulary)
        reason = " (no file word lies outside the vocabulary)" if unk == "mean_of_missing" else ""
        unk_text = (
            f"seeded random unit vector orthogonal to the vocabulary mean{reason}; "
            f"largest cosine with a vocabulary vector {unk_cosine:.3f}"
        )
    return unk_vector, unk_text


def _eos_row(eos, rows, transform, vocabulary, mean_direction, unk_vector, rng, pieces,
             piece_ids, file_words):
    """`(vector, text)` of `</s>` by the `eos` strategy (see
    :func:`target_embedding_table`); `text` says how it was made.

    Raises:
        ValueError: `eos="file"` without a non-zero `</s>` row in the file (of
            `file_words` words), or `eos="negative_period"` without a full stop.
    """
    if eos == "far":
        eos_vector, eos_cosine = _far_unit_vector(
            rng, _orthonormal_rows(mean_direction, unk_vector), vocabulary
        )
        eos_text = (f"seeded random unit vector orthogonal to the vocabulary mean and <unk>, "
                    f"best of {_SPECIAL_CANDIDATES} draws; largest cosine with a vocabulary "
                    f"vector {eos_cosine:.3f}")
    elif eos == "file":
        if rows.file_eos is None:
            raise ValueError(
                f"eos='file' takes the vector file's own row for {pieces[EOS_ID]!r}, and "
                f"the {file_words} words hold no non-zero one (train_word_vectors("
                f"..., eos_token={pieces[EOS_ID]!r}) writes one). Received: eos='file'")
        eos_vector = transform(rows.file_eos)
        eos_text = (f"the vector file's {pieces[EOS_ID]} row; largest cosine with a "
                    f"vocabulary vector {float(np.max(vocabulary @ eos_vector)):.3f}")
    else:
        period, period_piece = _period_piece(piece_ids, rows.has_vector)
        if period is None:
            raise ValueError(
                "eos='negative_period' is minus the full stop's row, and neither '.' nor "
                "'▁.' is a piece with a vector. Received: eos='negative_period'")
        eos_vector = -rows.table[period]
        eos_text = (f"minus the row of {period_piece!r}; largest cosine with a "
                    f"vocabulary vector {float(np.max(vocabulary @ eos_vector)):.3f}")
    return eos_vector, eos_text


def target_embedding_table(tokenizer, words, vectors, unk="mean_of_missing", seed=0,
                           center=False, remove_components=0, eos="far"):
    """Lays word vectors out as unit-norm targets, one row per tokenizer id.

    Row `i` is the L2-normalised vector of the piece
    `tokenizer.id_to_piece(i)` (exact match of the piece text, `"▁"`
    included). The model's softmax vocabulary stays the tokenizer's; the
    vocabulary of the continuous head is the pieces that have a vector.
    Pieces without one (never seen when the vectors were trained, or absent
    from a foreign vector file) get the `<unk>` vector and
    `has_vector=False`; `counts["without_vector"]` says how many. Because
    they share `<unk>`'s row, a nearest-neighbour decoder that breaks ties by
    the lowest id outputs `<unk>` (id 1) for them.

    **Post-processing** (`center`, `remove_components`). Word vectors share a
    large common direction and a few dominant ones (Mu & Viswanath 2018);
    points near the mean become *hubs*, the nearest neighbour of many queries
    (Radovanović et al. 2010), and a nearest-neighbour decoder then outputs
    them far too often (`tf_outheads.metrics.hubness` measures it). With
    `center=True` the mean of the vocabulary's unit rows is subtracted (each
    piece counts once; the special rows are not in it, unlike the authors'
    `-center` in Sachin19/seq2seq-con, whose zero special rows then all
    became the same vector), and with `remove_components=D` the centred rows
    lose their components along their top `D` principal directions
    ("all-but-the-top", Mu & Viswanath's Algorithm 1, D ≈ dim / 100); the
    rows are then L2-normalised again. The special vectors below are made
    afterwards, from the post-processed rows.

    The special ids get deliberate vectors (a vector the file has for
    `"<pad>"`, `"<unk>"` or `"<s>"` is ignored; one for `"</s>"` only with
    `eos="file"`):

    - `<pad>` (0): zeros. It is never a target: losses mask it.
    - `<unk>` (1), `unk="mean_of_missing"`: the normalised mean of the
      (unit-normalised, post-processed) vectors of file words that are *not*
      pieces of the tokenizer (NOTES: "UNK = normalised mean of excluded
      vectors", Kumar & Tsvetkov). The VIVO report used the *negative* mean
      of the excluded vectors and found its norm very small; we take the mean
      itself: it points where rare words live, which is where a prediction
      for an unknown word should land. If every file word is a piece, as with
      vectors trained by :func:`train_word_vectors`, nothing is excluded,
      `<unk>` is (almost) never a training target, and it gets a far vector
      made like `</s>`'s below (`unk="far"` always does this). It used to
      get the normalised mean of all the vectors (`unk="mean_of_all"`,
      still available), but that direction is where a barely trained
      model's predictions land, and a nearest-neighbour decoder emitted
      `<unk>` for almost every word.
    - `</s>` (3), `eos="far"`: a seeded random unit vector, orthogonal to the
      mean direction of the vocabulary vectors and to `<unk>`, chosen as the
      one of 64 draws whose largest cosine with any vocabulary vector is
      smallest, so that no word is near the end of the sentence.
      `eos="file"`: the file's own vector for the `</s>` piece,
      post-processed like the others (the authors' code takes it when the
      `.vec` has one; fastText's command line learns it from line ends,
      :func:`train_word_vectors` with `eos_token="</s>"`). `eos="negative_period"`:
      minus the full stop's row (`"."`, else `"▁."`; the VIVO code's
      `--eos_vector_replace`).
    - `<s>` (2): never predicted (it is only the decoder's first input), but
      given a unit vector the same way (also orthogonal to `</s>`) rather
      than zeros, so a decoder input table initialised from these rows
      (ReWE) tells `<s>` from `<pad>`. Decoders must not output it.

    Args:
        tokenizer: `SubwordTokenizer` (anything with `vocab_size` and
            `id_to_piece`). The model's target tokenizer.
        words: list of str. Words of the vector file, as from
            :func:`load_word_vectors`.
        vectors: float array `(len(words), dim)`, `dim >= 4`.
        unk: str. `"mean_of_missing"`, `"mean_of_all"` or `"far"`, as above.
            Defaults to `"mean_of_missing"`.
        seed: int. Seed of the far `<unk>`, `</s>` and `<s>` draws. Defaults
            to `0`.
        center: bool. Subtract the vocabulary's mean before normalising, as
            above. Defaults to `False`.
        remove_components: int >= 0. Principal components removed after
            centring (needs `center=True`); at most `dim - 4`. Defaults to `0`.
        eos: str. `"far"`, `"file"` or `"negative_period"`, as above. Defaults
            to `"far"`.

    Returns:
        A `TargetTable`.

    Raises:
        ValueError: if `vectors` is not `(len(words), dim)` with `dim >= 4`,
            holds a non-finite value, `unk` or `eos` is unknown,
            `remove_components` is negative, too large or given without
            `center`, no ordinary piece of the tokenizer has a non-zero vector,
            `eos="file"` and the file has no non-zero `</s>` vector, or
            `eos="negative_period"` and no full-stop piece has a vector.

    Example:

    ```python
    words, vectors = tf_outheads.data.load_word_vectors("run/target_vectors.vec")
    table = tf_outheads.data.target_embedding_table(
        target_tokenizer, words, vectors, center=True, remove_components=3)
    print(table)  # counts, the post-processing, how each special vector was made
    table.vectors.shape  # (target_tokenizer.vocab_size, 300)
    ```

    References:
        Kumar & Tsvetkov 2019, §4 (unit-norm pretrained targets, UNK);
        Boldt et al., VIVO report, §2.3 and §4 (sensitivity to EOS/UNK);
        Mu & Viswanath 2018, "All-but-the-Top", Algorithm 1;
        Radovanović et al. 2010 (hubness).
    """
    words, vectors = _checked_inputs(words, vectors, unk, eos, seed, center, remove_components)
    vocab_size = int(tokenizer.vocab_size)
    pieces = [tokenizer.id_to_piece(index) for index in range(vocab_size)]
    piece_ids = {piece: index for index, piece in enumerate(pieces)}
    rows = _file_rows(vocab_size, piece_ids, words, vectors)
    table, has_vector = rows.table, rows.has_vector
    if remove_components >= int(has_vector.sum()):
        raise ValueError(
            f"`remove_components` must be below the number of pieces with a vector "
            f"({int(has_vector.sum())}). Received: remove_components={remove_components}")
    transform, postprocessing = _postprocessor(table[has_vector], center, remove_components)
    table[has_vector] = transform(table[has_vector])
    vocabulary = table[has_vector]

    # The special rows, drawn in this order from one generator: <unk>, </s>, <s>.
    mean_direction = _unit(vocabulary.mean(axis=0))
    rng = np.random.default_rng(seed)
    unk_vector, unk_text = _unk_row(unk, rows, transform, vocabulary, mean_direction, rng)
    eos_vector, eos_text = _eos_row(eos, rows, transform, vocabulary, mean_direction,
                                    unk_vector, rng, pieces, piece_ids, len(words))
    bos_vector, bos_cosine = _far_unit_vector(
        rng, _orthonormal_rows(mean_direction, unk_vector, eos_vector), vocabulary
    )

    table[PAD_ID] = 0.0
    table[UNK_ID] = unk_vector
    table[BOS_ID] = bos_vector
    table[EOS_ID] = eos_vector
    without = ~has_vector
    without[list(_SPECIAL_IDS)] = False
    table[without] = unk_vector

    special = {
        pieces[PAD_ID]: "zeros (never a target; masked)",
        pieces[UNK_ID]: unk_text,
        pieces[BOS_ID]: (
            f"seeded random unit vector orthogonal to the vocabulary mean, <unk> and "
            f"</s> (never predicted); largest cosine with a vocabulary vector "
            f"{bos_cosine:.3f}"
        ),
        pieces[EOS_ID]: eos_text,
    }
    counts = {
        "vocabulary": vocab_size,
        "special": len(_SPECIAL_IDS),
        "with_vector": int(has_vector.sum()),
        "without_vector": int(without.sum()),
        "file_words": len(words),
        "file_words_outside_vocabulary": sum(1 for word in words if word not in piece_ids),
        "zero_vectors": int((~rows.nonzero).sum()),
    }
    result = TargetTable(
        vectors=table.astype(np.float32),
        has_vector=has_vector,
        counts=counts,
        special=special,
        postprocessing=postprocessing,
    )
    logger.info("Target embedding table:\n%s", result)
    return result

"""Target word vectors for continuous-output heads (vMF, cosine/MSE) and ReWE.

A continuous-output decoder predicts a vector and is trained against a fixed,
unit-norm vector per target token (Kumar & Tsvetkov 2019); ReWE regresses the
same kind of vector next to the softmax (Jauregi Unanue et al. 2019). The
papers used pretrained fastText vectors of *words*. Nothing can be downloaded
here, and our models predict SentencePiece *pieces*, so the vectors are
trained on the target side of the corpus itself, tokenized by the model's own
tokenizer: one vector per piece, keyed by the piece's text, so row `i` of the
table belongs to id `i` of the softmax.

Three steps:

1. :func:`train_word_vectors` trains gensim fastText (skip-gram) on the
   tokenized target side and writes a word2vec text file (`.vec`).
2. :func:`load_word_vectors` reads a `.vec` (or a word2vec/fastText `.bin`)
   into `(words, vectors)`, stopping on a malformed line with a
   :class:`~tf_outheads.data.CorpusError` that says `path:LINE: what is wrong`.
3. :func:`target_embedding_table` lays the vectors out in the tokenizer's id
   order, L2-normalised, with deliberate vectors for `<pad>`, `<unk>`, `<s>`
   and `</s>` (results are very sensitive to the EOS/UNK vectors).
"""

import dataclasses
import logging
import os

import numpy as np

from tf_outheads.data.corpus import CorpusError
from tf_outheads.data.corpus import _read_lines
from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.special_tokens import UNK_ID
from tf_outheads.validation import positive_int

__all__ = [
    "TargetTable",
    "train_word_vectors",
    "load_word_vectors",
    "target_embedding_table",
    "align_word_vectors",
    "write_word_vectors",
]

logger = logging.getLogger(__name__)

WORD_VECTOR_MODELS = ("fasttext", "word2vec")
UNK_STRATEGIES = ("mean_of_missing", "mean_of_all", "far")
EOS_STRATEGIES = ("far", "file", "negative_period")

# fastText's default of 2M n-gram buckets would hold 2M x 300 float32 (2.4 GB).
# SentencePiece pieces are short: an 8K-piece vocabulary has about 30K distinct
# character 3..6-grams, so 2^18 buckets keep hash collisions rare at 1/8 the memory.
_NGRAM_BUCKETS = 1 << 18
# Sentences tokenized per call of the in-graph tokenizer.
_TOKENIZE_BATCH = 4096
# First int32 of a Facebook fastText `.bin` (FASTTEXT_FILEFORMAT_MAGIC_INT32).
_FASTTEXT_MAGIC = (793712314).to_bytes(4, "little")
# Random draws tried for each of the `</s>` and `<s>` vectors; the one whose
# largest cosine with a vocabulary vector is smallest is kept.
_SPECIAL_CANDIDATES = 64
# Special ids, in the order the table describes them.
_SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)


def _tokenize_to_pieces(sentences, tokenizer):
    """Returns one list of piece strings per non-blank sentence."""
    texts = [text for text in sentences if text.strip()]
    return [row for row in tokenizer.pieces(texts, batch_size=_TOKENIZE_BATCH) if row]


def _format_row(word, vector):
    # str() of a numpy float32 is the shortest text that reads back to the same
    # float32, so a written file loads to identical arrays.
    return word + " " + " ".join(str(value) for value in vector) + "\n"


def _write_vec(path, words, vectors):
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    # Write next to the target and rename, so an interrupted run never leaves
    # a truncated file that later loads with a confusing error.
    temporary_path = path + ".tmp"
    with open(temporary_path, "w", encoding="utf-8", newline="\n") as stream:
        stream.write(f"{len(words)} {vectors.shape[1]}\n")
        for word, vector in zip(words, vectors.astype(np.float32, copy=False)):
            stream.write(_format_row(word, vector))
    os.replace(temporary_path, path)


def write_word_vectors(path, words, vectors):
    """Writes `words` and their `vectors` `(n, m)` as a word2vec text file (`.vec`),
    atomically; :func:`load_word_vectors` reads it back to identical float32 arrays."""
    _write_vec(os.fspath(path), list(words), np.asarray(vectors, np.float32))


def align_word_vectors(reference_words, reference_vectors, words, vectors):
    """Vectors of two trainings in one space: `reference` as it is, the others rotated.

    Two skip-gram trainings (a parent's data and a child's, in a vocabulary update)
    give vectors in unrelated spaces. The orthogonal map `W` that best sends the
    second training's vectors of the words both have onto the reference's
    (orthogonal Procrustes: `W = U Vᵀ` from the SVD `Xᵀ Y = U S Vᵀ`; Smith et al. 2017
    map word vectors between spaces so) puts the words only the second has into the
    reference's space.

    Args:
        reference_words, reference_vectors: the reference (kept as they are).
        words, vectors: the other training, `(n, m)` with the reference's `m`.

    Returns:
        `(words, vectors, report)`: the reference's words and vectors, then the words
        only the other training has, rotated; `report` `{"shared", "added",
        "cosine"}`: the words used to fit the map, those added, and the mean cosine of
        the shared words' rotated vectors to their reference vectors (1 is a perfect fit).

    Raises:
        ValueError: if the dimensions differ or fewer than `m` words are shared.
    """
    reference_vectors, vectors = (np.asarray(reference_vectors, np.float64),
                                  np.asarray(vectors, np.float64))
    if reference_vectors.shape[1] != vectors.shape[1]:
        raise ValueError("Aligned vectors need one dimension. Received: "
                         f"{reference_vectors.shape[1]} and {vectors.shape[1]}")
    index = {word: i for i, word in enumerate(reference_words)}
    shared = [(index[word], i) for i, word in enumerate(words) if word in index]
    if len(shared) < vectors.shape[1]:
        raise ValueError(f"Only {len(shared)} words are in both trainings; aligning "
                         f"{vectors.shape[1]}-dimensional vectors needs at least as many.")
    target, source = (reference_vectors[[r for r, _ in shared]],
                      vectors[[o for _, o in shared]])
    u, _, vt = np.linalg.svd(source.T @ target)
    rotation = u @ vt
    mapped = source @ rotation
    cosine = np.mean(np.sum(mapped * target, axis=1) / np.maximum(
        np.linalg.norm(mapped, axis=1) * np.linalg.norm(target, axis=1), 1e-12))
    added = [i for i, word in enumerate(words) if word not in index]
    out_words = list(reference_words) + [words[i] for i in added]
    out_vectors = np.concatenate([reference_vectors, vectors[added] @ rotation])
    return out_words, out_vectors.astype(np.float32), {
        "shared": len(shared), "added": len(added), "cosine": round(float(cosine), 4)}


def train_word_vectors(
    sentences,
    tokenizer,
    path,
    dim=300,
    epochs=5,
    window=5,
    min_count=1,
    seed=0,
    workers=1,
    model="fasttext",
    eos_token=None,
):
    """Trains skip-gram vectors of the tokenizer's pieces and writes a `.vec`.

    The target sentences are split with `tokenizer` (the SentencePiece model
    the translation model uses), so each vector belongs to a piece such as
    `"▁God"` and lines up with a softmax id through
    :func:`target_embedding_table`. The papers used pretrained fastText word
    vectors; nothing can be downloaded here, so the vectors are trained on the
    corpus itself (pass a larger monolingual target-side text for better
    vectors).

    The model is gensim's fastText (Bojanowski et al. 2017) in skip-gram mode
    with negative sampling (gensim defaults otherwise: 5 negatives, character
    3- to 6-grams, `sample=1e-3`, learning rate 0.025), or plain word2vec
    skip-gram with `model="word2vec"`. Only pieces seen at least `min_count`
    times are written; fastText could synthesise n-gram vectors for unseen
    pieces, but those are untrained guesses, and the table gives such pieces
    the `<unk>` vector instead (and reports them).

    Training is deterministic given `seed` with `workers=1`: gensim draws all
    its random numbers (initial vectors, negatives, window shrinking,
    down-sampling) from generators seeded with `seed`, and a single worker
    thread processes the sentences in order. With `workers > 1` the threads
    race on the shared weights and the vectors change from run to run.

    Args:
        sentences: iterable of str. Target-side sentences (not tokenized).
            Blank ones are skipped.
        tokenizer: `SubwordTokenizer`. The model's target tokenizer.
        path: str or path-like. Where the word2vec text file is written
            (header `"N DIM"`, then `"piece v1 ... vDIM"` per line, most
            frequent piece first); parent directories are created.
        dim: int. Vector size. Defaults to `300` (the papers' size).
        epochs: int. Passes over the sentences. Defaults to `5`.
        window: int. Largest context distance, in pieces. Defaults to `5`.
        min_count: int. Pieces seen fewer times get no vector. Defaults to `1`.
        seed: int. Seed of every random draw. Defaults to `0`.
        workers: int. Training threads; keep `1` for reproducible vectors.
            Defaults to `1`.
        model: str. `"fasttext"` or `"word2vec"` (no character n-grams: pieces
            such as `.”’` and `.”` then share nothing but their contexts).
            Defaults to `"fasttext"`.
        eos_token: str or `None`. When given (e.g. `"</s>"`), the token is
            appended to every sentence, as the fastText command line does with
            each line end, so the file gets a vector for the end of a sentence
            (`target_embedding_table(..., eos="file")` uses it). Defaults to
            `None`.

    Returns:
        str, `path`.

    Raises:
        ValueError: if an argument is out of range, `sentences` is a single
            string, or no sentence has a piece.

    Example:

    ```python
    corpus = tf_outheads.data.read_tsv("tf_outheads_zoo/data/bible-es-en.tsv.gz")
    _, target_tokenizer = tf_outheads.data.build_tokenizers(
        corpus.sources, corpus.targets, "run/tokenizer")
    path = tf_outheads.data.train_word_vectors(
        corpus.targets, target_tokenizer, "run/target_vectors.vec")
    words, vectors = tf_outheads.data.load_word_vectors(path)
    ```

    References:
        Bojanowski et al. 2017, "Enriching Word Vectors with Subword
        Information" (fastText). Kumar & Tsvetkov 2019, §4: pretrained
        fastText target vectors.
    """
    for name, value in (
        ("dim", dim),
        ("epochs", epochs),
        ("window", window),
        ("min_count", min_count),
        ("workers", workers),
    ):
        positive_int(name, value)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int. Received: seed={seed!r}")
    if model not in WORD_VECTOR_MODELS:
        raise ValueError(
            f"`model` must be one of {WORD_VECTOR_MODELS}. Received: model={model!r}"
        )
    if isinstance(sentences, (str, bytes)):
        raise ValueError(
            f"`sentences` must be an iterable of sentences, not one string. "
            f"Received: sentences={sentences[:40]!r}"
        )
    sentences = [str(text) for text in sentences]
    if eos_token is not None and (not isinstance(eos_token, str) or not eos_token
                                  or any(c.isspace() for c in eos_token)):
        raise ValueError(f"`eos_token` must be a non-empty str without spaces, or None. "
                         f"Received: eos_token={eos_token!r}")
    corpus = _tokenize_to_pieces(sentences, tokenizer)
    if not corpus:
        raise ValueError(
            f"`sentences` must hold at least one sentence with a piece. "
            f"Received: {len(sentences)} sentence(s), all blank"
        )
    if eos_token is not None:
        corpus = [row + [eos_token] for row in corpus]

    # gensim is imported here so that `import tf_outheads` stays fast for
    # models that never use word vectors.
    import gensim

    options = dict(
        vector_size=int(dim),
        window=int(window),
        min_count=int(min_count),
        sg=1,
        epochs=int(epochs),
        seed=int(seed),
        workers=int(workers),
    )
    if model == "fasttext":
        trained = gensim.models.FastText(corpus, bucket=_NGRAM_BUCKETS, **options)
    else:
        trained = gensim.models.Word2Vec(corpus, **options)
    path = os.fspath(path)
    words = list(trained.wv.index_to_key)
    logger.info(
        "Trained %s vectors (dim %d) for %d pieces on %d sentences; writing %s.",
        model,
        dim,
        len(words),
        len(corpus),
        path,
    )
    _write_vec(path, words, np.asarray(trained.wv.vectors, dtype=np.float32))
    return path


def _load_text(path):
    """Reads a word2vec text file; every problem names its line."""
    lines = _read_lines(path)
    try:
        _, header = next(lines)
    except StopIteration:
        raise CorpusError(
            f"{path}: the file is empty; expected a header line \"N DIM\" "
            f"(word2vec text format)."
        ) from None
    header_fields = header.split()
    try:
        if len(header_fields) != 2:
            raise ValueError
        count, dim = (int(field) for field in header_fields)
        if count < 1 or dim < 1:
            raise ValueError
    except ValueError:
        raise CorpusError(
            f"{path}:1: the header is {header[:80]!r}; expected two positive "
            f"integers \"N DIM\" (number of vectors, vector size) as in the "
            f"word2vec text format."
        ) from None

    words = []
    vectors = np.empty((count, dim), dtype=np.float32)
    first_line = {}
    for line_number, line in lines:
        if len(words) == count:
            raise CorpusError(
                f"{path}:{line_number}: one line more than the header's {count} "
                f"vector(s) (line 1); expected exactly {count} vector lines."
            )
        # The word is everything before the first space (pieces never hold
        # one; "▁" stands for it). fastText ends each line with a space.
        word, _, rest = line.partition(" ")
        if not word:
            raise CorpusError(
                f"{path}:{line_number}: the line is empty or starts with a space; "
                f"expected \"word v1 ... v{dim}\"."
            )
        values = rest.split()
        if len(values) != dim:
            raise CorpusError(
                f"{path}:{line_number}: found {len(values)} value(s) after the "
                f"word {word!r}; expected {dim} as the header (line 1) says."
            )
        try:
            row = np.asarray(values, dtype=np.float32)
        except ValueError:
            position, bad = next(
                (index, value)
                for index, value in enumerate(values)
                if not _is_number(value)
            )
            raise CorpusError(
                f"{path}:{line_number}: value {position + 1} of {word!r} is "
                f"{bad[:40]!r}; expected a decimal number."
            ) from None
        if not np.all(np.isfinite(row)):
            position = int(np.flatnonzero(~np.isfinite(row))[0])
            raise CorpusError(
                f"{path}:{line_number}: value {position + 1} of {word!r} is "
                f"{values[position]!r}, not finite in float32; expected finite numbers."
            )
        if word in first_line:
            raise CorpusError(
                f"{path}:{line_number}: the word {word!r} repeats line "
                f"{first_line[word]}; expected each word once."
            )
        first_line[word] = line_number
        vectors[len(words)] = row
        words.append(word)
    if len(words) != count:
        raise CorpusError(
            f"{path}:1: the header announces {count} vector(s) but the file "
            f"holds {len(words)}; expected the count in the header to match."
        )
    return words, vectors


def _is_number(text):
    try:
        np.float32(text)
    except ValueError:
        return False
    return True


def _load_binary(path):
    """Reads a fastText `.bin` model or a word2vec binary file."""
    with open(path, "rb") as stream:
        head = stream.read(4)
    if not head:
        raise CorpusError(
            f"{path}: the file is empty; expected a fastText or word2vec binary file."
        )
    import gensim  # Imported on use, as in `train_word_vectors`.

    try:
        if head == _FASTTEXT_MAGIC:
            keyed_vectors = gensim.models.fasttext.load_facebook_vectors(path)
        else:
            keyed_vectors = gensim.models.KeyedVectors.load_word2vec_format(
                path, binary=True
            )
    except (ValueError, EOFError, OSError, UnicodeDecodeError, AssertionError) as error:
        kind = "fastText" if head == _FASTTEXT_MAGIC else "word2vec"
        raise CorpusError(
            f"{path}: cannot be read as a {kind} binary file "
            f"({type(error).__name__}: {error}); expected a Facebook fastText "
            f"`.bin` model or a word2vec binary file."
        ) from None
    words = list(keyed_vectors.index_to_key)
    if not words:
        raise CorpusError(f"{path}: holds no vectors; expected at least one.")
    return words, np.array(keyed_vectors.vectors, dtype=np.float32)


def load_word_vectors(path):
    """Reads word vectors from a word2vec text (`.vec`) or binary (`.bin`) file.

    Text files (any name not ending in `.bin`; gunzipped on the fly when it
    ends in `.gz`; a leading byte order mark is skipped) are read as UTF-8
    word2vec text: a header `"N DIM"`, then
    `N` lines `"word v1 ... vDIM"`. The word is everything before the first
    space; values may be separated by any whitespace and a trailing space (as
    fastText writes) is allowed.

    `.bin` files are recognised by their first bytes: a Facebook fastText
    model (`fasttext.train_*().save_model`, the `cc.*.bin` downloads; magic
    number 793712314) is read with
    `gensim.models.fasttext.load_facebook_vectors`, which rebuilds each
    word's full vector from its own row plus its character n-grams; anything
    else is read as word2vec binary (`"N DIM\\n"` then each word with `DIM`
    raw float32) with `gensim.models.KeyedVectors.load_word2vec_format(...,
    binary=True)`. A gensim pickle (`KeyedVectors.save`) is neither.

    Args:
        path: str or path-like. The vector file.

    Returns:
        A tuple `(words, vectors)`: list of str, and a float32 array
        `(N, DIM)` whose row `i` belongs to `words[i]`, in file order.

    Raises:
        CorpusError: (a `ValueError`) naming the file and, for text files,
            the 1-based line: empty file, header not `"N DIM"`, a line with
            the wrong number of values, a value that is not a finite number,
            a repeated word, fewer or more lines than the header announces,
            invalid UTF-8, a truncated or damaged `.gz`; for `.bin`, a file
            gensim cannot read.

    Example:

    ```python
    words, vectors = tf_outheads.data.load_word_vectors("run/target_vectors.vec")
    vectors.shape  # (len(words), 300)
    ```
    """
    path = os.fspath(path)
    if path.endswith(".bin"):
        return _load_binary(path)
    return _load_text(path)


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

    vocab_size = int(tokenizer.vocab_size)
    dim = vectors.shape[1]
    pieces = [tokenizer.id_to_piece(index) for index in range(vocab_size)]
    piece_ids = {piece: index for index, piece in enumerate(pieces)}
    norms = np.linalg.norm(vectors, axis=1)
    nonzero = norms > 0
    unit_vectors = np.zeros_like(vectors)
    unit_vectors[nonzero] = vectors[nonzero] / norms[nonzero, None]

    table = np.zeros((vocab_size, dim))
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
    if remove_components >= int(has_vector.sum()):
        raise ValueError(
            f"`remove_components` must be below the number of pieces with a vector "
            f"({int(has_vector.sum())}). Received: remove_components={remove_components}")
    transform, postprocessing = _postprocessor(table[has_vector], center, remove_components)
    table[has_vector] = transform(table[has_vector])
    vocabulary = table[has_vector]

    mean_direction = _unit(vocabulary.mean(axis=0))
    rng = np.random.default_rng(seed)
    if unk == "mean_of_missing" and outside:
        unk_vector = _unit(transform(unit_vectors[outside]).mean(axis=0))
        unk_text = (
            f"normalised mean of the {len(outside)} file vectors of words outside "
            f"the vocabulary"
        )
    elif unk == "mean_of_all":
        unk_vector = _unit(transform(unit_vectors[nonzero]).mean(axis=0))
        unk_text = f"normalised mean of all {int(nonzero.sum())} file vectors"
    else:
        unk_vector, unk_cosine = _far_unit_vector(
            rng, _orthonormal_rows(mean_direction), vocabulary)
        reason = " (no file word lies outside the vocabulary)" if unk == "mean_of_missing" else ""
        unk_text = (
            f"seeded random unit vector orthogonal to the vocabulary mean{reason}; "
            f"largest cosine with a vocabulary vector {unk_cosine:.3f}"
        )

    if eos == "far":
        eos_vector, eos_cosine = _far_unit_vector(
            rng, _orthonormal_rows(mean_direction, unk_vector), vocabulary
        )
        eos_text = (f"seeded random unit vector orthogonal to the vocabulary mean and <unk>, "
                    f"best of {_SPECIAL_CANDIDATES} draws; largest cosine with a vocabulary "
                    f"vector {eos_cosine:.3f}")
    elif eos == "file":
        if file_eos is None:
            raise ValueError(
                f"eos='file' takes the vector file's own row for {pieces[EOS_ID]!r}, and "
                f"the {len(words)} words hold no non-zero one (train_word_vectors("
                f"..., eos_token={pieces[EOS_ID]!r}) writes one). Received: eos='file'")
        eos_vector = transform(file_eos)
        eos_text = (f"the vector file's {pieces[EOS_ID]} row; largest cosine with a "
                    f"vocabulary vector {float(np.max(vocabulary @ eos_vector)):.3f}")
    else:
        period, period_piece = _period_piece(piece_ids, has_vector)
        if period is None:
            raise ValueError(
                "eos='negative_period' is minus the full stop's row, and neither '.' nor "
                "'▁.' is a piece with a vector. Received: eos='negative_period'")
        eos_vector = -table[period]
        eos_text = (f"minus the row of {period_piece!r}; largest cosine with a "
                    f"vocabulary vector {float(np.max(vocabulary @ eos_vector)):.3f}")
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
        "zero_vectors": int((~nonzero).sum()),
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

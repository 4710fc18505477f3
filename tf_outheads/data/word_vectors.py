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
   and `</s>` (results are very sensitive to the EOS/UNK vectors). It and its
   :class:`TargetTable` live in :mod:`tf_outheads.data.target_table`; this module
   trains, aligns, writes and reads the vectors.
"""

import logging
import os

import numpy as np

from tf_outheads.data.corpus import CorpusError
from tf_outheads.data.corpus import _read_lines
# The table's own module; imported here too, where users have always found it.
from tf_outheads.validation import positive_int

__all__ = ["train_word_vectors", "load_word_vectors", "align_word_vectors",
           "write_word_vectors"]

logger = logging.getLogger(__name__)

WORD_VECTOR_MODELS = ("fasttext", "word2vec")

# fastText's default of 2M n-gram buckets would hold 2M x 300 float32 (2.4 GB).
# SentencePiece pieces are short: an 8K-piece vocabulary has about 30K distinct
# character 3..6-grams, so 2^18 buckets keep hash collisions rare at 1/8 the memory.
_NGRAM_BUCKETS = 1 << 18
# Sentences tokenized per call of the in-graph tokenizer.
_TOKENIZE_BATCH = 4096
# First int32 of a Facebook fastText `.bin` (FASTTEXT_FILEFORMAT_MAGIC_INT32).
_FASTTEXT_MAGIC = (793712314).to_bytes(4, "little")


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


def _checked_sentences(sentences, dim, epochs, window, min_count, workers, seed, model,
                       eos_token):
    """`sentences` as a list of str, once every argument of :func:`train_word_vectors`
    but the tokenizer and the path is checked."""
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
    return sentences


def _skip_gram(corpus, model, dim, epochs, window, min_count, seed, workers):
    """gensim's skip-gram `model` (`"fasttext"` or `"word2vec"`) trained on `corpus`,
    lists of pieces, as :func:`train_word_vectors` describes."""
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
        return gensim.models.FastText(corpus, bucket=_NGRAM_BUCKETS, **options)
    return gensim.models.Word2Vec(corpus, **options)


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
    corpus = tf_outheads.data.read_tsv("bible-es-en.tsv.gz")  # train/dev/test splits
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
    sentences = _checked_sentences(sentences, dim, epochs, window, min_count, workers, seed,
                                   model, eos_token)
    corpus = _tokenize_to_pieces(sentences, tokenizer)
    if not corpus:
        raise ValueError(
            f"`sentences` must hold at least one sentence with a piece. "
            f"Received: {len(sentences)} sentence(s), all blank"
        )
    if eos_token is not None:
        corpus = [row + [eos_token] for row in corpus]
    trained = _skip_gram(corpus, model, dim, epochs, window, min_count, seed, workers)
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

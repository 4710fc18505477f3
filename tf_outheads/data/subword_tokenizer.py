"""SentencePiece subword models: trained once, applied in-graph.

Models are trained with the `sentencepiece` package (:func:`train_sentencepiece`)
and applied with `tensorflow_text.SentencepieceTokenizer` (:class:`SubwordTokenizer`),
so the tf.data pipeline, the decoders and an exported SavedModel all run the same
model as TensorFlow ops. Every model puts the special tokens at the ids of
:mod:`tf_outheads.data.special_tokens` (`<pad>`=0, `<unk>`=1, `<s>`=2,
`</s>`=3).

A run's pair of tokenizers, built into a directory once and loaded from it with
their fingerprints checked, is :mod:`tf_outheads.data.tokenizer`.
"""

import hashlib
import os

import sentencepiece
import tensorflow as tf
import tensorflow_text

from tf_outheads.data.special_tokens import BOS_ID
from tf_outheads.data.special_tokens import BOS_PIECE
from tf_outheads.data.special_tokens import EOS_ID
from tf_outheads.data.special_tokens import EOS_PIECE
from tf_outheads.data.special_tokens import PAD_ID
from tf_outheads.data.special_tokens import PAD_PIECE
from tf_outheads.data.special_tokens import UNK_ID
from tf_outheads.data.special_tokens import UNK_PIECE

__all__ = ["TokenizerError", "train_sentencepiece", "SubwordTokenizer"]

MODEL_TYPES = ("bpe", "unigram")
# SentencePiece's own default. Fixed rather than os.cpu_count(): unigram
# training sums statistics per thread, so the thread count changes the model.
_NUM_THREADS = 16
# Longest training sentence in bytes (SentencePiece skips longer ones; its
# default of 4192 would silently drop long verses or paragraphs).
_MAX_SENTENCE_BYTES = 1 << 16


class TokenizerError(ValueError):
    """A SentencePiece model file is damaged or is not the one recorded.

    The message starts with the path of the model file and, for a mismatch,
    also names the `tokenizer.json` that records the expected fingerprint.
    """


def model_fingerprint(model_proto):
    """`"sha256:"` and the first 16 hex digits of the sha256 of a serialized model
    (:attr:`SubwordTokenizer.fingerprint`)."""
    return "sha256:" + hashlib.sha256(model_proto).hexdigest()[:16]


def _checked_texts(texts, vocab_size, model_type, character_coverage, seed):
    """`texts` as a list of str, once every argument of :func:`train_sentencepiece`
    but the model prefix is checked."""
    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 8:
        raise ValueError(
            f"`vocab_size` must be an int >= 8 (4 special tokens plus pieces). "
            f"Received: vocab_size={vocab_size!r}"
        )
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"`model_type` must be one of {MODEL_TYPES}. "
            f"Received: model_type={model_type!r}"
        )
    if not 0.0 < character_coverage <= 1.0:
        raise ValueError(
            f"`character_coverage` must be in (0, 1]. "
            f"Received: character_coverage={character_coverage!r}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"`seed` must be a non-negative int. Received: seed={seed!r}")
    texts = [str(text) for text in texts]
    if not any(text.strip() for text in texts):
        raise ValueError(
            f"`texts` must hold at least one non-blank sentence. "
            f"Received: texts with {len(texts)} entries, all blank"
        )
    return texts


def train_sentencepiece(
    texts,
    model_prefix,
    vocab_size,
    model_type="bpe",
    character_coverage=1.0,
    seed=0,
):
    """Trains a SentencePiece model with the library's special-token ids.

    Training reads every sentence in order (no input sampling or shuffling)
    and seeds SentencePiece's random generator, so the same texts and
    arguments give the same model. `vocab_size` is a soft limit
    (`hard_vocab_limit=False`): a corpus too small to fill it gives a smaller
    vocabulary instead of an error.

    Args:
        texts: iterable of str. Training sentences.
        model_prefix: str or path-like. Output prefix; the model is written to
            `model_prefix + ".model"` (and the vocabulary to `".vocab"`).
            Missing parent directories are created.
        vocab_size: int, at least 8. Target vocabulary size, special tokens
            included.
        model_type: str. `"bpe"` or `"unigram"`. Defaults to `"bpe"`.
        character_coverage: float in (0, 1]. Share of characters the model
            must cover; rarer ones map to `<unk>`. Defaults to `1.0`.
        seed: int. Seed of SentencePiece's random generator. Defaults to `0`.

    Returns:
        str, the path of the `.model` file.

    Raises:
        ValueError: if an argument is out of range, `texts` holds no
            non-blank sentence, or `vocab_size` is smaller than the number of
            characters to cover.

    Example:

    ```python
    path = tf_outheads.data.train_sentencepiece(
        ["Y dijo Dios: Sea la luz.", "God said, “Let there be light.”"],
        model_prefix="/tmp/spm_demo", vocab_size=60)
    tokenizer = tf_outheads.data.SubwordTokenizer(path)
    ```
    """
    texts = _checked_texts(texts, vocab_size, model_type, character_coverage, seed)
    model_prefix = os.fspath(model_prefix)
    parent = os.path.dirname(model_prefix)
    if parent:
        os.makedirs(parent, exist_ok=True)

    sentencepiece.set_random_generator_seed(seed)
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=iter(texts),
            model_prefix=model_prefix,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            pad_piece=PAD_PIECE,
            unk_piece=UNK_PIECE,
            bos_piece=BOS_PIECE,
            eos_piece=EOS_PIECE,
            hard_vocab_limit=False,
            # Determinism: read all sentences, in order.
            input_sentence_size=0,
            shuffle_input_sentence=False,
            num_threads=_NUM_THREADS,
            max_sentence_length=_MAX_SENTENCE_BYTES,
            minloglevel=2,
        )
    except RuntimeError as error:
        if "Vocabulary size is smaller than required_chars" in str(error):
            raise ValueError(
                f"`vocab_size` is too small for the characters of the training "
                f"texts ({error}); increase it or lower `character_coverage`. "
                f"Received: vocab_size={vocab_size}"
            ) from None
        raise
    return model_prefix + ".model"


class SubwordTokenizer(tf.Module):
    """A SentencePiece model applied with TensorFlow ops.

    Holds the serialized model (`model_proto`) and a
    `tensorflow_text.SentencepieceTokenizer`, so `tokenize` and `detokenize`
    run inside `tf.function`, `tf.data` and SavedModels. Being a `tf.Module`,
    it can be set as an attribute of an exported module and is saved with it.

    Args:
        model_path: str or path-like. A `.model` file written by
            :func:`train_sentencepiece`. Give either this or `model_proto`.
        model_proto: bytes. A serialized model, as in
            :meth:`from_bytes`. Defaults to `None`.
        name: str. Module name. Defaults to `None` (`"subword_tokenizer"`).

    Raises:
        ValueError: if neither or both of `model_path` and `model_proto` are
            given.
        TokenizerError: (a `ValueError`) naming `model_path`, if the bytes
            are not a SentencePiece model (a truncated, empty or damaged
            file) or the model does not put `<pad>`, `<unk>`, `<s>`, `</s>`
            at ids 0, 1, 2, 3.

    Example:

    ```python
    tokenizer = tf_outheads.data.SubwordTokenizer("run/spm_joint.model")
    ids = tokenizer.tokenize(["Y dijo Dios: Sea la luz."])  # RaggedTensor
    tokenizer.decode_to_text(ids)  # ["Y dijo Dios: Sea la luz."]
    ```
    """

    def __init__(self, model_path=None, model_proto=None, name=None):
        super().__init__(name=name)
        if (model_path is None) == (model_proto is None):
            raise ValueError(
                f"Give exactly one of `model_path` and `model_proto`. "
                f"Received: model_path={model_path!r}, model_proto="
                f"{None if model_proto is None else f'<{len(model_proto)} bytes>'}"
            )
        if model_path is not None:
            model_path = os.fspath(model_path)
            with open(model_path, "rb") as stream:
                model_proto = stream.read()
        self.model_path = model_path
        self.model_proto = bytes(model_proto)
        origin = model_path or "(SentencePiece model from bytes)"
        try:
            self._processor = sentencepiece.SentencePieceProcessor(
                model_proto=self.model_proto
            )
        except RuntimeError as error:
            raise TokenizerError(
                f"{origin}: cannot be read as a SentencePiece model "
                f"({len(self.model_proto)} bytes; {str(error).strip()}); the "
                f"file is truncated, damaged or not a `.model` file. Expected "
                f"a model written by `train_sentencepiece`."
            ) from error
        # An empty input parses as a model without pieces.
        if self._processor.get_piece_size() == 0:
            raise TokenizerError(
                f"{origin}: cannot be read as a SentencePiece model (it holds "
                f"no pieces; {len(self.model_proto)} bytes); the file is "
                f"empty, truncated or damaged. Expected a model written by "
                f"`train_sentencepiece`."
            )
        expected = {"pad": PAD_ID, "unk": UNK_ID, "bos": BOS_ID, "eos": EOS_ID}
        found = {
            "pad": self._processor.pad_id(),
            "unk": self._processor.unk_id(),
            "bos": self._processor.bos_id(),
            "eos": self._processor.eos_id(),
        }
        if found != expected:
            raise TokenizerError(
                f"{origin}: the SentencePiece model must put the special "
                f"tokens at {expected}; train it with `train_sentencepiece`. "
                f"Received: special ids {found}"
            )
        self._tokenizer = self._make_op_tokenizer()

    def _make_op_tokenizer(self):
        # The resource's name scope is the model's fingerprint. `tf.saved_model.load`
        # names a restored resource after its op's name (with one suffix per load), and
        # tensorflow-text's default scope is the same for every tokenizer: the source
        # and target tokenizers of a SavedModel were restored as one resource, so that
        # separate vocabularies detokenized the output with the source model.
        name = "sentencepiece_" + self.fingerprint.split(":")[1]
        return tensorflow_text.SentencepieceTokenizer(model=self.model_proto,
                                                      out_type=tf.int32, name=name)

    def ensure_resource(self):
        """Rebuilds the in-graph SentencePiece resource if it was freed.

        `tf.random.set_seed` (and so `keras.utils.set_random_seed`) clears
        TensorFlow's eager kernel cache, which frees the resource that
        `tensorflow_text.SentencepieceTokenizer` holds. Eager calls rebuild it
        by themselves; a graph (a `tf.data` map, a `tf.function`) captures the
        resource when it is traced, so the pipeline builders call this first.
        A graph traced *before* seeding still holds the freed resource: seed
        first, then build datasets.
        """
        if tf.executing_eagerly():
            self._run("tokenize", tf.constant([""]))

    def _run(self, method, *args):
        # `tf.random.set_seed` (and so `keras.utils.set_random_seed`) clears the
        # eager kernel cache, which frees the SentencePiece resource. Eagerly,
        # rebuild it once and retry instead of failing for good.
        try:
            return getattr(self._tokenizer, method)(*args)
        except tf.errors.NotFoundError:
            if not tf.executing_eagerly():
                raise
            self._tokenizer = self._make_op_tokenizer()
            return getattr(self._tokenizer, method)(*args)

    @classmethod
    def from_bytes(cls, model_bytes, name=None):
        """Creates a tokenizer from a serialized SentencePiece model.

        Args:
            model_bytes: bytes. Content of a `.model` file.
            name: str. Module name. Defaults to `None`.

        Returns:
            A `SubwordTokenizer` whose `model_path` is `None`.

        Example:

        ```python
        copy = tf_outheads.data.SubwordTokenizer.from_bytes(tokenizer.model_proto)
        ```
        """
        return cls(model_proto=model_bytes, name=name)

    def __repr__(self):
        source = self.model_path or f"<{len(self.model_proto)} bytes>"
        return f"SubwordTokenizer({source}, vocab_size={self.vocab_size})"

    @property
    def fingerprint(self):
        """str. `"sha256:"` and the first 16 hex digits of the sha256 of
        `model_proto`, e.g. `"sha256:3f2a9c0d4b1e7a65"`.

        Two tokenizers with the same fingerprint apply the same model, and so
        map text to the same ids. Record it next to a trained model and
        compare it when the model is loaded with a tokenizer again: a model
        given another tokenizer of the same vocabulary size runs without
        error and translates garbage. :func:`tf_outheads.data.build_tokenizers`
        records it in `tokenizer.json`, and :func:`tf_outheads.data.load_tokenizers`
        checks it.
        """
        return model_fingerprint(self.model_proto)

    @property
    def vocab_size(self):
        """int. Number of pieces, special tokens included."""
        return int(self._processor.get_piece_size())

    @property
    def model_type(self):
        """str. The SentencePiece model's type: `"bpe"`, `"unigram"`, `"word"` or
        `"char"`."""
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto()
        proto.ParseFromString(self.model_proto)
        return sentencepiece_model_pb2.TrainerSpec.ModelType.Name(
            proto.trainer_spec.model_type).lower()

    def piece_score(self, piece_id):
        """float. The model's score of piece `piece_id` (a unigram model: its
        log-probability; a BPE model: minus its merge rank)."""
        return float(self._processor.get_score(int(piece_id)))

    def id_to_piece(self, piece_id):
        """Returns the piece (str) at id `piece_id`, e.g. `"</s>"` for 3."""
        return self._processor.id_to_piece(int(piece_id))

    def id_to_string(self, ids):
        """In-graph piece strings of an int tensor of ids (any shape), e.g. `b"▁God"`.

        Unlike `id_to_piece` (eager, one id), this is a TensorFlow op
        (tensorflow-text's `SentencepieceIdToStringOp`) usable inside
        `tf.function` and exported graphs.
        """
        return self._run("id_to_string", ids)

    def piece_to_id(self, piece):
        """Returns the id (int) of `piece`; unknown pieces give `UNK_ID`."""
        return int(self._processor.piece_to_id(piece))

    def vocabulary(self):
        """All pieces, in id order (list of str)."""
        return [self.id_to_piece(i) for i in range(self.vocab_size)]

    def pieces(self, texts, batch_size=4096):
        """The piece strings of each text, as `tokenize` splits it (eagerly, in
        batches): a list of lists of str, one per text, empty texts included."""
        vocabulary = self.vocabulary()
        texts = list(texts)
        out = []
        for start in range(0, len(texts), batch_size):
            ids = self.tokenize(texts[start:start + batch_size])
            out.extend([vocabulary[i] for i in row] for row in ids.to_list())
        return out

    def tokenize(self, strings):
        """Splits strings into subword ids, without `<s>` or `</s>`.

        Args:
            strings: string tensor or str / list of str. A scalar or a 1-D
                batch.

        Returns:
            For a scalar: an int32 tensor `(length,)`. For a batch: an int32
            `tf.RaggedTensor` `(batch, None)`.

        Example:

        ```python
        tokenizer.tokenize("Y dijo Dios")          # (3,) int32
        tokenizer.tokenize(["Y dijo Dios", "luz"]) # RaggedTensor
        ```
        """
        return self._run("tokenize", strings)

    def detokenize(self, ids):
        """Turns ids back into text, stopping at the first `</s>`.

        Everything from the first `EOS_ID` on is dropped, then `PAD_ID` and
        `BOS_ID` are removed, so decoder outputs (`<s> w1 w2 </s> <pad> ...`)
        can be passed as they are.

        Args:
            ids: int tensor `(length,)` or `(batch, length)`, or an int
                `tf.RaggedTensor` `(batch, None)`.

        Returns:
            A string tensor: a scalar for a 1-D input, `(batch,)` otherwise.

        Example:

        ```python
        tokenizer.detokenize([[2, 120, 57, 3, 0, 0]])  # [b"..."]
        ```
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)
        single = ids.shape.rank == 1
        if single:
            ids = ids[tf.newaxis]
        # Keep positions before the first EOS that are neither PAD nor BOS.
        before_eos = tf.math.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1) == 0
        keep = before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)
        texts = self._run("detokenize", tf.ragged.boolean_mask(ids, keep))
        return texts[0] if single else texts

    def decode_to_text(self, ids):
        """Eager convenience: `detokenize` to a list of Python strings.

        Args:
            ids: as for :meth:`detokenize`.

        Returns:
            list of str, one per sequence (a 1-D input gives a list of one).

        Example:

        ```python
        tokenizer.decode_to_text(tokenizer.tokenize(["Sea la luz."]))
        ```
        """
        texts = self.detokenize(ids).numpy()
        if isinstance(texts, bytes):
            texts = [texts]
        return [text.decode("utf-8") for text in texts]

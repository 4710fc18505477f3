"""SentencePiece subword models: trained once, applied in-graph.

Models are trained with the `sentencepiece` package and applied with
`tensorflow_text.SentencepieceTokenizer`, so the tf.data pipeline, the
decoders and an exported SavedModel all run the same model as TensorFlow ops.
Every model puts the special tokens at the ids of
:mod:`tf_outheads.data.special_tokens` (`<pad>`=0, `<unk>`=1, `<s>`=2,
`</s>`=3).
"""

import hashlib
import json
import logging
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

__all__ = [
    "TokenizerError",
    "train_sentencepiece",
    "SubwordTokenizer",
    "build_tokenizers",
    "load_tokenizers",
    "tokenizer_fingerprints",
]

logger = logging.getLogger(__name__)

MODEL_TYPES = ("bpe", "unigram")
CONFIG_FILENAME = "tokenizer.json"
_CONFIG_FORMAT = 1
# SentencePiece's own default. Fixed rather than os.cpu_count(): unigram
# training sums statistics per thread, so the thread count changes the model.
_NUM_THREADS = 16
# Longest training sentence in bytes (SentencePiece skips longer ones; its
# default of 4192 would silently drop long verses or paragraphs).
_MAX_SENTENCE_BYTES = 1 << 16
# tokenizer.json keys recording which model files the tokenizers were built
# with; not part of the request that decides whether to retrain.
_MODEL_FINGERPRINT_KEYS = {
    "source_model": "source_model_fingerprint",
    "target_model": "target_model_fingerprint",
}


class TokenizerError(ValueError):
    """A SentencePiece model file is damaged or is not the one recorded.

    The message starts with the path of the model file and, for a mismatch,
    also names the `tokenizer.json` that records the expected fingerprint.
    """


def _fingerprint(model_proto):
    return "sha256:" + hashlib.sha256(model_proto).hexdigest()[:16]


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
        return tensorflow_text.SentencepieceTokenizer(model=self.model_proto, out_type=tf.int32)

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
        error and translates garbage. :func:`build_tokenizers` records it in
        `tokenizer.json`, and :func:`load_tokenizers` checks it.
        """
        return _fingerprint(self.model_proto)

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


def corpus_fingerprint(source_texts, target_texts):
    """sha256 (hex) of parallel texts: what a cached tokenizer or word-pair file was made from."""
    digest = hashlib.sha256()
    for side, texts in (("source", source_texts), ("target", target_texts)):
        digest.update(f"{side}:{len(texts)}\n".encode("utf-8"))
        for text in texts:
            digest.update(text.encode("utf-8"))
            digest.update(b"\0")
    return digest.hexdigest()


def _read_config(path):
    try:
        with open(path, encoding="utf-8") as stream:
            config = json.load(stream)
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def build_tokenizers(
    source_texts,
    target_texts,
    directory,
    vocab_size=8000,
    joint=True,
    model_type="bpe",
    seed=0,
):
    """Trains (or loads from cache) the source and target subword models.

    A joint model is trained once on sources and targets together and saved
    as `directory/spm_joint.model`; both returned tokenizers use it (needed
    for tied source/target embeddings). Separate models are saved as
    `spm_source.model` and `spm_target.model`.

    `directory/tokenizer.json` records the configuration, a sha256
    fingerprint of the training texts (`"fingerprint"`) and the
    :attr:`SubwordTokenizer.fingerprint` of each trained model
    (`"source_model_fingerprint"`, `"target_model_fingerprint"`). When the
    configuration and texts match the request and the model files exist, the
    models are loaded (and checked against their recorded fingerprints, as in
    :func:`load_tokenizers`) instead of retrained; any difference retrains.
    Which one happened is logged at INFO level by the
    `tf_outheads.data.tokenizer` logger.

    Args:
        source_texts: iterable of str. Source-side training sentences.
        target_texts: iterable of str. Target-side training sentences.
        directory: str or path-like. Where the models and `tokenizer.json`
            live; created if missing.
        vocab_size: int. Vocabulary size of each model. Defaults to `8000`.
        joint: bool. One model for both sides. Defaults to `True`.
        model_type: str. `"bpe"` or `"unigram"`. Defaults to `"bpe"`.
        seed: int. SentencePiece seed. Defaults to `0`.

    Returns:
        A tuple `(source_tokenizer, target_tokenizer)` of `SubwordTokenizer`.

    Raises:
        ValueError: as :func:`train_sentencepiece`.
        TokenizerError: (a `ValueError`) when reusing the directory, as
            :func:`load_tokenizers`: a model file is damaged or is not the
            one `tokenizer.json` records. Nothing is retrained over it.

    Example:

    ```python
    corpus = tf_outheads.data.read_tsv("tf_outheads_zoo/data/bible-es-en.tsv.gz")
    source_tokenizer, target_tokenizer = tf_outheads.data.build_tokenizers(
        corpus.sources, corpus.targets, "run/tokenizer", vocab_size=8000)
    ```
    """
    if not isinstance(joint, bool):
        raise ValueError(f"`joint` must be a bool. Received: joint={joint!r}")
    source_texts = [str(text) for text in source_texts]
    target_texts = [str(text) for text in target_texts]
    directory = os.fspath(directory)
    if joint:
        file_names = {"source_model": "spm_joint.model", "target_model": "spm_joint.model"}
    else:
        file_names = {"source_model": "spm_source.model", "target_model": "spm_target.model"}
    config = {
        "format": _CONFIG_FORMAT,
        "vocab_size": vocab_size,
        "joint": joint,
        "model_type": model_type,
        "seed": seed,
        "character_coverage": 1.0,
        "fingerprint": corpus_fingerprint(source_texts, target_texts),
        **file_names,
    }
    config_path = os.path.join(directory, CONFIG_FILENAME)
    cached = _read_config(config_path)
    # The request, without the model fingerprints (only known once trained;
    # absent from files written before they were recorded).
    cached_request = None if cached is None else {
        key: value
        for key, value in cached.items()
        if key not in _MODEL_FINGERPRINT_KEYS.values()
    }
    paths = {key: os.path.join(directory, name) for key, name in file_names.items()}
    files_exist = all(os.path.isfile(path) for path in paths.values())
    if cached_request == config and files_exist:
        logger.info("Loading cached tokenizers from %s (configuration matches).", directory)
        return load_tokenizers(directory)
    if cached_request is None:
        reason = f"no readable {CONFIG_FILENAME}"
    elif cached_request != config:
        changed = sorted(
            key for key in config if cached_request.get(key) != config.get(key)
        )
        reason = f"changed: {', '.join(changed)}"
    else:
        reason = "model files missing"
    logger.info("Training tokenizers in %s (%s).", directory, reason)

    os.makedirs(directory, exist_ok=True)
    # Remove the old record first, so an interrupted training never leaves a
    # config that matches half-written models.
    if os.path.exists(config_path):
        os.remove(config_path)
    options = dict(vocab_size=vocab_size, model_type=model_type, seed=seed)
    if joint:
        train_sentencepiece(
            source_texts + target_texts,
            os.path.join(directory, "spm_joint"),
            **options,
        )
    else:
        train_sentencepiece(source_texts, os.path.join(directory, "spm_source"), **options)
        train_sentencepiece(target_texts, os.path.join(directory, "spm_target"), **options)
    tokenizers = _make_tokenizers(paths)
    record = dict(config)
    for key, tokenizer in zip(("source_model", "target_model"), tokenizers):
        record[_MODEL_FINGERPRINT_KEYS[key]] = tokenizer.fingerprint
    temporary_path = config_path + ".tmp"
    with open(temporary_path, "w", encoding="utf-8") as stream:
        json.dump(record, stream, indent=2, sort_keys=True)
    os.replace(temporary_path, config_path)
    return tokenizers


def _read_tokenizer_directory(directory):
    """Returns `(config_path, config, paths)` of a `build_tokenizers` directory,
    `paths` mapping `"source_model"`/`"target_model"` to existing files."""
    directory = os.fspath(directory)
    config_path = os.path.join(directory, CONFIG_FILENAME)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(
            f"{config_path}: not found; expected a tokenizer directory written by "
            f"`tf_outheads.data.build_tokenizers`."
        )
    try:
        with open(config_path, encoding="utf-8") as stream:
            config = json.load(stream)
    except ValueError as error:
        raise ValueError(f"{config_path}: not valid JSON ({error}).") from None
    if not isinstance(config, dict):
        raise ValueError(
            f"{config_path}: holds a JSON {type(config).__name__}; expected an "
            f"object written by `tf_outheads.data.build_tokenizers`."
        )
    paths = {}
    for key in ("source_model", "target_model"):
        if key not in config:
            raise ValueError(f"{config_path}: missing the key {key!r}.")
        paths[key] = os.path.join(directory, config[key])
        if not os.path.isfile(paths[key]):
            raise FileNotFoundError(
                f"{paths[key]}: not found; named by {config_path} as {key}."
            )
    return config_path, config, paths


def _make_tokenizers(paths):
    if paths["target_model"] == paths["source_model"]:
        joint_tokenizer = SubwordTokenizer(paths["source_model"], name="joint_tokenizer")
        return joint_tokenizer, joint_tokenizer
    source_tokenizer = SubwordTokenizer(paths["source_model"], name="source_tokenizer")
    target_tokenizer = SubwordTokenizer(paths["target_model"], name="target_tokenizer")
    return source_tokenizer, target_tokenizer


def _check_fingerprint(config_path, config, key, model_path, found):
    """Raises `TokenizerError` if `config` records another fingerprint for `key`."""
    fingerprint_key = _MODEL_FINGERPRINT_KEYS[key]
    expected = config.get(fingerprint_key)
    # Files written before fingerprints were recorded: nothing to check.
    if expected is None or expected == found:
        return
    raise TokenizerError(
        f"{model_path}: the SentencePiece model has fingerprint {found}, but "
        f"{config_path} records {expected!r} as {fingerprint_key}. The file "
        f"was replaced or changed after the tokenizers were built (e.g. "
        f"copied from another run); a model trained with one tokenizer "
        f"translates garbage with another, even of the same vocabulary size. "
        f"Restore the original file, or rebuild the tokenizers and retrain."
    )


def load_tokenizers(directory):
    """Loads the tokenizers that :func:`build_tokenizers` saved in `directory`.

    Each model file is checked against the fingerprint that `tokenizer.json`
    records for it (see :attr:`SubwordTokenizer.fingerprint`), so a model
    file swapped for another one (say, another run's, of the same vocabulary
    size) is refused instead of silently mapping text to other ids. A
    `tokenizer.json` written before fingerprints were recorded loads without
    this check.

    Args:
        directory: str or path-like. A directory holding `tokenizer.json`
            and the model files it names.

    Returns:
        A tuple `(source_tokenizer, target_tokenizer)`; for a joint model
        both are the same `SubwordTokenizer` object.

    Raises:
        FileNotFoundError: if `directory` has no `tokenizer.json` or a model
            file it names is missing.
        ValueError: if `tokenizer.json` is not valid JSON or lacks a key.
        TokenizerError: (a `ValueError`) if a model file cannot be read as a
            SentencePiece model (the message names it), or its fingerprint
            differs from the one recorded (the message names the model file
            and `tokenizer.json`, with both fingerprints).

    Example:

    ```python
    source_tokenizer, target_tokenizer = tf_outheads.data.load_tokenizers("run/tokenizer")
    ```
    """
    config_path, config, paths = _read_tokenizer_directory(directory)
    tokenizers = _make_tokenizers(paths)
    for key, tokenizer in zip(("source_model", "target_model"), tokenizers):
        _check_fingerprint(config_path, config, key, paths[key], tokenizer.fingerprint)
    return tokenizers


def tokenizer_fingerprints(directory):
    """The fingerprints of the source and target models of a tokenizer directory.

    Computed from the model files themselves (without loading them), and
    checked against `tokenizer.json` as in :func:`load_tokenizers`. Record
    them with a trained model, and compare them when the model is used
    again, to be sure it gets the tokenizers it was trained with.

    Args:
        directory: str or path-like. A directory written by
            :func:`build_tokenizers`.

    Returns:
        A tuple `(source_fingerprint, target_fingerprint)` of str, each as
        :attr:`SubwordTokenizer.fingerprint` (equal for a joint model).

    Raises:
        FileNotFoundError, ValueError, TokenizerError: as
            :func:`load_tokenizers` (a fingerprint mismatch only).

    Example:

    ```python
    source_fingerprint, target_fingerprint = (
        tf_outheads.data.tokenizer_fingerprints("run/tokenizer"))
    ```
    """
    config_path, config, paths = _read_tokenizer_directory(directory)
    fingerprints = []
    for key in ("source_model", "target_model"):
        with open(paths[key], "rb") as stream:
            found = _fingerprint(stream.read())
        _check_fingerprint(config_path, config, key, paths[key], found)
        fingerprints.append(found)
    return tuple(fingerprints)

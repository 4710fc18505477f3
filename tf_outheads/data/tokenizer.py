"""A run's tokenizers: built into a directory once, then loaded from it and checked.

:func:`build_tokenizers` trains the source and target SentencePiece models (or one
joint model) and records in `tokenizer.json` what they were trained from and the
fingerprint of each model file; asked again for the same, it loads them instead
of training. :func:`load_tokenizers` and :func:`tokenizer_fingerprints` check the
model files against that record, so a model never runs with another run's
tokenizer. The models themselves (:func:`train_sentencepiece`,
:class:`SubwordTokenizer`) are :mod:`tf_outheads.data.subword_tokenizer`.
"""

import hashlib
import json
import logging
import os

# The model's own module; imported here too, where users have always found it.
from tf_outheads.data.subword_tokenizer import SubwordTokenizer
from tf_outheads.data.subword_tokenizer import TokenizerError
from tf_outheads.data.subword_tokenizer import model_fingerprint
from tf_outheads.data.subword_tokenizer import train_sentencepiece

__all__ = ["build_tokenizers", "load_tokenizers", "tokenizer_fingerprints"]

logger = logging.getLogger(__name__)

CONFIG_FILENAME = "tokenizer.json"
_CONFIG_FORMAT = 1
# tokenizer.json keys recording which model files the tokenizers were built
# with; not part of the request that decides whether to retrain.
_MODEL_FINGERPRINT_KEYS = {
    "source_model": "source_model_fingerprint",
    "target_model": "target_model_fingerprint",
}


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
    corpus = tf_outheads.data.read_tsv("bible-es-en.tsv.gz")  # train/dev/test splits
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
    paths = {key: os.path.join(directory, name) for key, name in file_names.items()}
    reason = _reason_to_train(config_path, config, paths)
    if reason is None:
        logger.info("Loading cached tokenizers from %s (configuration matches).", directory)
        return load_tokenizers(directory)
    logger.info("Training tokenizers in %s (%s).", directory, reason)
    _train_models(directory, config_path, source_texts, target_texts, joint,
                  dict(vocab_size=vocab_size, model_type=model_type, seed=seed))
    tokenizers = _make_tokenizers(paths)
    _write_config(config_path, config, tokenizers)
    return tokenizers


def _reason_to_train(config_path, config, paths):
    """Why the models must be trained, or `None` when the cached ones serve: the
    request `config` is the one `config_path` records and the model files exist."""
    cached = _read_config(config_path)
    # The request, without the model fingerprints (only known once trained;
    # absent from files written before they were recorded).
    cached_request = None if cached is None else {
        key: value
        for key, value in cached.items()
        if key not in _MODEL_FINGERPRINT_KEYS.values()
    }
    files_exist = all(os.path.isfile(path) for path in paths.values())
    if cached_request == config and files_exist:
        return None
    if cached_request is None:
        return f"no readable {CONFIG_FILENAME}"
    if cached_request != config:
        changed = sorted(
            key for key in config if cached_request.get(key) != config.get(key)
        )
        return f"changed: {', '.join(changed)}"
    return "model files missing"


def _train_models(directory, config_path, source_texts, target_texts, joint, options):
    """Trains the joint model, or the source and target models, into `directory`."""
    os.makedirs(directory, exist_ok=True)
    # Remove the old record first, so an interrupted training never leaves a
    # config that matches half-written models.
    if os.path.exists(config_path):
        os.remove(config_path)
    if joint:
        train_sentencepiece(
            source_texts + target_texts,
            os.path.join(directory, "spm_joint"),
            **options,
        )
    else:
        train_sentencepiece(source_texts, os.path.join(directory, "spm_source"), **options)
        train_sentencepiece(target_texts, os.path.join(directory, "spm_target"), **options)


def _write_config(config_path, config, tokenizers):
    """Writes `tokenizer.json` atomically: the request `config` and the fingerprint
    of each trained model."""
    record = dict(config)
    for key, tokenizer in zip(("source_model", "target_model"), tokenizers):
        record[_MODEL_FINGERPRINT_KEYS[key]] = tokenizer.fingerprint
    temporary_path = config_path + ".tmp"
    with open(temporary_path, "w", encoding="utf-8") as stream:
        json.dump(record, stream, indent=2, sort_keys=True)
    os.replace(temporary_path, config_path)


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
            found = model_fingerprint(stream.read())
        _check_fingerprint(config_path, config, key, paths[key], found)
        fingerprints.append(found)
    return tuple(fingerprints)

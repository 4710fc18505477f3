import json
import logging
import os
import shutil
import unicodedata

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from tf_outheads.data import BOS_ID
from tf_outheads.data import EOS_ID
from tf_outheads.data import PAD_ID
from tf_outheads.data import UNK_ID
from tf_outheads.data import SubwordTokenizer
from tf_outheads.data import TokenizerError
from tf_outheads.data import build_tokenizers
from tf_outheads.data import load_tokenizers
from tf_outheads.data import tokenizer_fingerprints
from tf_outheads.data import train_sentencepiece
from tf_outheads.data import special_tokens

LOGGER = "tf_outheads.data.tokenizer"


def normalized(text):
    # SentencePiece applies NFKC and collapses runs of whitespace.
    return unicodedata.normalize("NFKC", " ".join(text.split()))


def test_special_token_ids(bible_tokenizer):
    assert bible_tokenizer.id_to_piece(PAD_ID) == special_tokens.PAD_PIECE == "<pad>"
    assert bible_tokenizer.id_to_piece(UNK_ID) == special_tokens.UNK_PIECE == "<unk>"
    assert bible_tokenizer.id_to_piece(BOS_ID) == special_tokens.BOS_PIECE == "<s>"
    assert bible_tokenizer.id_to_piece(EOS_ID) == special_tokens.EOS_PIECE == "</s>"
    assert bible_tokenizer.piece_to_id("</s>") == EOS_ID
    assert isinstance(bible_tokenizer.vocab_size, int)
    assert bible_tokenizer.vocab_size == 1000


def test_round_trip_on_corpus_lines(bible_slice, bible_tokenizer):
    lines = bible_slice.sources[:300] + bible_slice.targets[:300]
    ids = bible_tokenizer.tokenize(lines)
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    # Pieces only: no special token comes out of tokenize.
    assert not np.isin(ids.flat_values.numpy(), [PAD_ID, UNK_ID, BOS_ID, EOS_ID]).any()
    assert bible_tokenizer.decode_to_text(ids) == [normalized(line) for line in lines]


def test_tokenize_scalar_gives_dense_ids(bible_slice, bible_tokenizer):
    line = bible_slice.targets[0]
    ids = bible_tokenizer.tokenize(line)
    assert isinstance(ids, tf.Tensor) and ids.shape.rank == 1 and ids.dtype == tf.int32
    assert bible_tokenizer.tokenize([line])[0].numpy().tolist() == ids.numpy().tolist()
    assert bible_tokenizer.detokenize(ids).numpy().decode() == normalized(line)


def test_detokenize_stops_at_eos_and_drops_pad_and_bos(bible_slice, bible_tokenizer):
    first, second = bible_slice.targets[2], bible_slice.targets[3]
    first_ids = bible_tokenizer.tokenize(first).numpy().tolist()
    second_ids = bible_tokenizer.tokenize(second).numpy().tolist()
    width = max(len(first_ids), len(second_ids)) + 6
    rows = [
        # Decoder output: <s> ids </s> then junk and padding after the stop.
        [BOS_ID] + first_ids + [EOS_ID] + second_ids[:3],
        # No </s>: everything but padding is kept.
        second_ids,
    ]
    dense = np.full([2, width], PAD_ID, dtype=np.int64)
    for row, ids in zip(dense, rows):
        row[: len(ids)] = ids
    expected = [normalized(first), normalized(second)]
    assert bible_tokenizer.decode_to_text(dense) == expected
    assert bible_tokenizer.decode_to_text(tf.ragged.constant(rows)) == expected
    assert bible_tokenizer.decode_to_text(dense[0]) == expected[:1]


def test_tokenize_inside_tf_function(bible_slice, bible_tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def round_trip(strings):
        ids = bible_tokenizer.tokenize(strings)
        eos = tf.RaggedTensor.from_tensor(tf.fill(tf.stack([ids.nrows(), 1]), EOS_ID))
        # (batch, time) padded decoder-style output: ids, </s>, <pad>...
        return bible_tokenizer.detokenize(tf.concat([ids, eos], axis=1).to_tensor())

    lines = bible_slice.sources[10:20]
    texts = [text.decode() for text in round_trip(tf.constant(lines)).numpy()]
    assert texts == [normalized(line) for line in lines]


def test_tokenize_inside_tf_data(bible_slice, bible_tokenizer):
    lines = bible_slice.targets[:50]
    dataset = tf.data.Dataset.from_tensor_slices(lines).map(
        bible_tokenizer.tokenize, num_parallel_calls=2, deterministic=True
    )
    expected = bible_tokenizer.tokenize(lines)
    for ids, expected_ids in zip(dataset, expected):
        assert ids.numpy().tolist() == expected_ids.numpy().tolist()


def test_from_bytes_matches_file(bible_slice, bible_tokenizer):
    copy = SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)
    assert copy.model_path is None
    assert copy.vocab_size == bible_tokenizer.vocab_size
    lines = bible_slice.sources[:20]
    assert copy.tokenize(lines).to_list() == bible_tokenizer.tokenize(lines).to_list()


def test_rejects_model_with_other_special_ids(bible_slice, tmp_path):
    # SentencePiece defaults: <unk>=0, <s>=1, </s>=2, no <pad>.
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(bible_slice.sources[:200]),
        model_prefix=str(tmp_path / "default"),
        vocab_size=200,
        minloglevel=2,
    )
    with pytest.raises(ValueError, match="special tokens"):
        SubwordTokenizer(tmp_path / "default.model")


def test_train_sentencepiece_is_deterministic(bible_slice, tmp_path):
    texts = bible_slice.targets[:300]
    first = train_sentencepiece(texts, tmp_path / "a" / "spm", vocab_size=300)
    second = train_sentencepiece(texts, tmp_path / "b" / "spm", vocab_size=300)
    assert first == str(tmp_path / "a" / "spm.model") and os.path.isfile(first)
    first_tokenizer, second_tokenizer = SubwordTokenizer(first), SubwordTokenizer(second)
    assert [first_tokenizer.id_to_piece(i) for i in range(300)] == [
        second_tokenizer.id_to_piece(i) for i in range(300)
    ]


def test_train_sentencepiece_unigram(bible_slice, tmp_path):
    path = train_sentencepiece(
        bible_slice.sources[:300], tmp_path / "spm", vocab_size=300, model_type="unigram"
    )
    tokenizer = SubwordTokenizer(path)
    line = bible_slice.sources[5]
    assert tokenizer.decode_to_text(tokenizer.tokenize([line])) == [normalized(line)]


def test_small_corpus_does_not_fill_large_vocab(tmp_path):
    path = train_sentencepiece(["Y dijo Dios", "Sea la luz"], tmp_path / "spm", vocab_size=5000)
    assert SubwordTokenizer(path).vocab_size < 5000


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"vocab_size": 7}, "Received: vocab_size=7"),
        ({"vocab_size": 100.0}, "Received: vocab_size=100.0"),
        ({"model_type": "word"}, "Received: model_type='word'"),
        ({"texts": []}, "Received: texts with 0 entries"),
        ({"texts": ["", "  "]}, "Received: texts with 2 entries"),
        ({"vocab_size": 10}, "Received: vocab_size=10"),  # fewer than the characters
    ],
    ids=["vocab_too_small", "vocab_float", "model_type", "no_texts", "blank_texts", "chars"],
)
def test_train_sentencepiece_rejects_bad_arguments(tmp_path, arguments, message):
    kwargs = {"texts": ["Y dijo Dios: Sea la luz", "God said"], "vocab_size": 100}
    kwargs.update(arguments)
    with pytest.raises(ValueError, match=message):
        train_sentencepiece(model_prefix=tmp_path / "spm", **kwargs)


def test_build_tokenizers_caches(bible_slice, tmp_path, caplog):
    sources, targets = bible_slice.sources[:300], bible_slice.targets[:300]
    directory = tmp_path / "tokenizer"
    model_path = directory / "spm_joint.model"
    with caplog.at_level(logging.INFO, logger=LOGGER):
        source_tokenizer, target_tokenizer = build_tokenizers(
            sources, targets, directory, vocab_size=300
        )
        assert "Training tokenizers" in caplog.text
        assert source_tokenizer is target_tokenizer
        assert source_tokenizer.model_path == str(model_path)
        trained_at = model_path.stat().st_mtime_ns
        caplog.clear()

        build_tokenizers(sources, targets, directory, vocab_size=300)
        assert "Loading cached tokenizers" in caplog.text
        assert model_path.stat().st_mtime_ns == trained_at
        caplog.clear()

        tokenizer, _ = build_tokenizers(sources, targets, directory, vocab_size=320)
        assert "changed: vocab_size" in caplog.text
        assert tokenizer.vocab_size == 320
        caplog.clear()

        build_tokenizers(sources[:-1], targets, directory, vocab_size=320)
        assert "changed: fingerprint" in caplog.text


def test_build_tokenizers_separate_models(bible_slice, tmp_path):
    directory = tmp_path / "tokenizer"
    source_tokenizer, target_tokenizer = build_tokenizers(
        bible_slice.sources[:300], bible_slice.targets[:300], directory,
        vocab_size=300, joint=False,
    )
    assert source_tokenizer.model_path == str(directory / "spm_source.model")
    assert target_tokenizer.model_path == str(directory / "spm_target.model")
    assert source_tokenizer.model_proto != target_tokenizer.model_proto
    loaded_source, loaded_target = load_tokenizers(directory)
    assert loaded_source.model_proto == source_tokenizer.model_proto
    assert loaded_target.model_proto == target_tokenizer.model_proto


def test_load_tokenizers_without_config(tmp_path):
    with pytest.raises(FileNotFoundError, match="tokenizer.json") as info:
        load_tokenizers(tmp_path)
    assert str(tmp_path) in str(info.value)


def test_tokenizer_survives_set_random_seed(bible_tokenizer, bible_slice):
    """`tf.random.set_seed` frees the eager SentencePiece resource; it is rebuilt."""
    import keras

    from tf_outheads.data import SubwordTokenizer

    tokenizer = SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)
    line = bible_slice.sources[0]
    before = tokenizer.tokenize([line]).to_list()
    keras.utils.set_random_seed(7)
    assert tokenizer.tokenize([line]).to_list() == before
    assert tokenizer.decode_to_text(before)[0] == bible_tokenizer.decode_to_text(before)[0]


def test_pieces_are_the_tokenized_ids_as_strings_and_keep_empty_texts(bible_slice,
                                                                       bible_tokenizer):
    texts = [bible_slice.sources[0], "", bible_slice.targets[0]]
    pieces = bible_tokenizer.pieces(texts, batch_size=2)  # two batches
    vocabulary = bible_tokenizer.vocabulary()
    assert len(vocabulary) == bible_tokenizer.vocab_size and vocabulary[3] == "</s>"
    assert len(pieces) == 3 and pieces[1] == []
    for text, row in zip(texts, pieces):
        ids = bible_tokenizer.tokenize(text).numpy().tolist()
        assert row == [vocabulary[i] for i in ids]
    assert "▁Dios" in pieces[0] or "▁Dios" not in vocabulary


# --- damaged and swapped model files ---------------------------------------------------


@pytest.fixture(scope="module")
def tokenizer_directories(bible_slice, tmp_path_factory):
    """Two joint tokenizer directories of the same vocabulary size, trained on
    different verses (as two runs would be)."""
    first = tmp_path_factory.mktemp("run_a")
    second = tmp_path_factory.mktemp("run_b")
    build_tokenizers(bible_slice.sources[:300], bible_slice.targets[:300], first, vocab_size=300)
    build_tokenizers(
        bible_slice.sources[300:600], bible_slice.targets[300:600], second, vocab_size=300
    )
    return first, second


@pytest.mark.parametrize(
    "damage",
    [lambda data: data[: len(data) // 2], lambda data: b"", lambda data: b"not a model\n"],
    ids=["truncated", "empty", "text"],
)
def test_damaged_model_file_names_the_file(bible_tokenizer, tmp_path, damage):
    path = tmp_path / "spm_joint.model"
    path.write_bytes(damage(bible_tokenizer.model_proto))
    with pytest.raises(TokenizerError, match="cannot be read as a SentencePiece model") as info:
        SubwordTokenizer(path)
    assert str(info.value).startswith(f"{path}: ")


def test_load_tokenizers_damaged_model_names_the_file(tokenizer_directories, tmp_path):
    directory = tmp_path / "run"
    shutil.copytree(tokenizer_directories[0], directory)
    model_path = directory / "spm_joint.model"
    model_path.write_bytes(model_path.read_bytes()[:1000])
    with pytest.raises(TokenizerError) as info:
        load_tokenizers(directory)
    assert str(info.value).startswith(f"{model_path}: ")


def test_fingerprint_is_stable_and_tells_models_apart(tokenizer_directories):
    first, second = (load_tokenizers(directory)[0] for directory in tokenizer_directories)
    assert first.vocab_size == second.vocab_size == 300
    fingerprint = first.fingerprint
    assert fingerprint.startswith("sha256:") and len(fingerprint) == len("sha256:") + 16
    assert SubwordTokenizer.from_bytes(first.model_proto).fingerprint == fingerprint
    assert SubwordTokenizer(first.model_path).fingerprint == fingerprint
    assert second.fingerprint != fingerprint


def test_build_tokenizers_records_model_fingerprints(tokenizer_directories):
    directory = tokenizer_directories[0]
    tokenizer, _ = load_tokenizers(directory)
    config = json.loads((directory / "tokenizer.json").read_text(encoding="utf-8"))
    assert config["source_model_fingerprint"] == tokenizer.fingerprint
    assert config["target_model_fingerprint"] == tokenizer.fingerprint
    assert tokenizer_fingerprints(directory) == (tokenizer.fingerprint, tokenizer.fingerprint)


def test_build_tokenizers_separate_models_record_both_fingerprints(bible_slice, tmp_path):
    source_tokenizer, target_tokenizer = build_tokenizers(
        bible_slice.sources[:300], bible_slice.targets[:300], tmp_path,
        vocab_size=300, joint=False,
    )
    assert source_tokenizer.fingerprint != target_tokenizer.fingerprint
    assert tokenizer_fingerprints(tmp_path) == (
        source_tokenizer.fingerprint, target_tokenizer.fingerprint
    )
    (tmp_path / "spm_target.model").write_bytes((tmp_path / "spm_source.model").read_bytes())
    with pytest.raises(TokenizerError, match="target_model"):
        load_tokenizers(tmp_path)


def test_swapped_model_of_the_same_size_is_refused(bible_slice, tokenizer_directories, tmp_path):
    first, second = tokenizer_directories
    directory = tmp_path / "run"
    shutil.copytree(first, directory)
    # Another run's model, same vocabulary size: the ids would mean other pieces.
    shutil.copyfile(second / "spm_joint.model", directory / "spm_joint.model")
    for load in (load_tokenizers, tokenizer_fingerprints):
        with pytest.raises(TokenizerError) as info:
            load(directory)
        message = str(info.value)
        assert str(directory / "tokenizer.json") in message
        assert str(directory / "spm_joint.model") in message
    # Resuming the run does not retrain over the swapped file either.
    swapped = (directory / "spm_joint.model").read_bytes()
    with pytest.raises(TokenizerError):
        build_tokenizers(
            bible_slice.sources[:300], bible_slice.targets[:300], directory, vocab_size=300
        )
    assert (directory / "spm_joint.model").read_bytes() == swapped


def test_old_tokenizer_json_without_fingerprints_still_loads_and_is_reused(
    bible_slice, tokenizer_directories, tmp_path, caplog
):
    directory = tmp_path / "run"
    shutil.copytree(tokenizer_directories[0], directory)
    config_path = directory / "tokenizer.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    del config["source_model_fingerprint"], config["target_model_fingerprint"]
    config_path.write_text(json.dumps(config), encoding="utf-8")
    model_path = directory / "spm_joint.model"
    trained_at = model_path.stat().st_mtime_ns
    tokenizer, _ = load_tokenizers(directory)
    assert tokenizer_fingerprints(directory) == (tokenizer.fingerprint, tokenizer.fingerprint)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        reused, _ = build_tokenizers(
            bible_slice.sources[:300], bible_slice.targets[:300], directory, vocab_size=300
        )
    assert "Loading cached tokenizers" in caplog.text
    assert model_path.stat().st_mtime_ns == trained_at
    assert reused.fingerprint == tokenizer.fingerprint

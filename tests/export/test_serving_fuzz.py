"""Fuzzing the exported signatures: generated inputs through one SavedModel, loaded in process.

One tiny export (`export_of("tied")`: greedy default, beam widths 1 and
`BEAM`) answers well over 1,000 generated sources, in batches, through
`serving_default` and `translate`: empty strings, whitespace, zero-width and
control characters, invalid UTF-8 bytes, 10,000-character inputs, real
Spanish verses, random Unicode, and mixed batches of all of these, with
random per-request and per-row options. Every string input must give one row
of well-formed outputs, with `empty_source` set exactly where the source has
no subword piece; every non-finite or out-of-range option must be refused
with an error naming it. The generator is a seeded `random.Random`, so a
failure replays.
"""

import math
import random

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops for the load)

from tests.export.conftest import BEAM
from tests.export.options import DTYPES, signature_options
from tf_outheads import data
from tf_outheads.decoding.options import MAX_LENGTH_PENALTY
from tf_outheads.export import MAX_INPUT_BYTES, MAX_REQUEST_SOURCES, MAX_SOURCE_LENGTH

SEED = 20260518
WIDTHS = (1, BEAM)  # what the export holds a search for
# Characters the Bible tokenizer reads as no piece at all (checked against it
# below: the expected `empty_source` comes from the tokenizer, these only
# make sure the fuzz really sends such sources).
WHITESPACE = " \t\n\r\x0b\x0c\u00a0\u1680\u2000\u200a\u2028\u2029\u205f\u3000"
ZERO_WIDTH = "\u200b\u200c\u200e\u200f\ufeff"
CONTROL = "".join(chr(code) for code in [*range(0x01, 0x20), 0x7F])
# Bytes that are never valid UTF-8 on their own: continuation bytes, 0xF8-0xFF.
INVALID_BYTES = bytes([*range(0x80, 0xC0), *range(0xF8, 0x100)])
# Code points for random Unicode text (no surrogates: they are not UTF-8).
PLANES = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
          (0x2000, 0x206F), (0x3040, 0x30FF), (0x4E00, 0x4FFF), (0xE000, 0xE0FF),
          (0x1F300, 0x1F64F), (0x10000, 0x1007F), (0xFFF0, 0xFFFF)]
LONG_CHARACTERS = 10_000


@pytest.fixture(scope="module")
def loaded(export_of):
    """The tied export, loaded as a server loads it."""
    return tf.saved_model.load(export_of("tied"))


@pytest.fixture(scope="module")
def verses(bible_corpus_path):
    """Real Spanish verses of the corpus's test split."""
    return list(data.read_tsv(bible_corpus_path, split="test").sources[:300])


class Inputs:
    """Seeded generators of raw source bytes, one method per kind of input."""

    def __init__(self, rng, verses):
        self.rng = rng
        self.verses = verses

    def _from(self, alphabet, low=1, high=24):
        return "".join(self.rng.choice(alphabet) for _ in range(self.rng.randint(low, high)))

    def empty(self):
        return b""

    def whitespace(self):
        return self._from(WHITESPACE).encode("utf-8")

    def zero_width(self):
        return self._from(ZERO_WIDTH + WHITESPACE).encode("utf-8")

    def control(self):
        return self._from(CONTROL).encode("utf-8")

    def invalid_bytes(self):
        return bytes(self.rng.choice(INVALID_BYTES) for _ in range(self.rng.randint(1, 24)))

    def random_bytes(self):
        return bytes(self.rng.randrange(256) for _ in range(self.rng.randint(1, 40)))

    def unicode(self):
        def char():
            low, high = self.rng.choice(PLANES)
            return chr(self.rng.randint(low, high))
        return "".join(char() for _ in range(self.rng.randint(1, 40))).encode("utf-8")

    def verse(self):
        return self.rng.choice(self.verses).encode("utf-8")

    def damaged_verse(self):
        """A verse with zero-width, control, whitespace or invalid bytes spliced in."""
        text = self.rng.choice(self.verses).encode("utf-8")
        for _ in range(self.rng.randint(1, 6)):
            at = self.rng.randint(0, len(text))
            junk = self.rng.choice([self.zero_width, self.control, self.invalid_bytes,
                                    self.whitespace, self.unicode])()
            text = text[:at] + junk + text[at:]
        return text

    def long(self):
        """10,000 characters: verses, blanks, zero-width or random Unicode."""
        kind = self.rng.choice(["verses", "verses", "blank", "unicode"])
        if kind == "verses":
            text = " ".join(self.rng.choice(self.verses) for _ in range(150))
        elif kind == "blank":
            text = self._from(ZERO_WIDTH + WHITESPACE, LONG_CHARACTERS, LONG_CHARACTERS)
        else:
            text = "".join(self.unicode().decode("utf-8") for _ in range(600))
        return text[:LONG_CHARACTERS].ljust(LONG_CHARACTERS, ".").encode("utf-8")


NO_PIECE_KINDS = ("empty", "whitespace", "zero_width", "control", "invalid_bytes")
SHORT_KINDS = (*NO_PIECE_KINDS, "random_bytes", "unicode", "verse", "verse", "damaged_verse")


def piece_counts(tokenizer, sources):
    """Pieces of each source, read as the graph reads it (cut, invalid bytes → U+FFFD)."""
    texts = [source[:MAX_INPUT_BYTES].decode("utf-8", errors="replace") for source in sources]
    return tokenizer.tokenize(tf.constant(texts, tf.string)).row_lengths().numpy()


def random_options(rng, batch_size):
    """Per-request options in range: one value for the request or one per source."""
    choices = {
        "beam_size": [-1, 0, 1, 2, 3, BEAM, BEAM + 1, 100],
        "length_penalty": [-1.0, -5.0, 0.0, 0.6, 1.0, MAX_LENGTH_PENALTY],
        "num_hypotheses": [-1, 0, 1, 2, BEAM, 7],
        "replace_unk": [-1, 0, 1, 2],
        "with_alignments": [-1, 0, 1],
    }
    options = {}
    for name, values in choices.items():
        count = rng.choice([1, batch_size])
        dtype = tf.float32 if name == "length_penalty" else tf.int32
        options[name] = tf.constant([rng.choice(values) for _ in range(count)], dtype)
    return signature_options(**options)


def expected_widths(options, batch_size):
    """The width each row is decoded with, and the n-best size it asked for."""
    if options is None:
        return np.ones(batch_size, int), np.ones(batch_size, int)
    requested = np.broadcast_to(options["beam_size"].numpy(), [batch_size])
    requested = np.where(requested < 1, 1, requested)  # the export's default: 1
    widths = np.array([max(w for w in WIDTHS if w <= r) for r in requested], int)
    n_best = np.broadcast_to(options["num_hypotheses"].numpy(), [batch_size])
    n_best = np.clip(np.where(n_best < 1, 1, n_best), 1, widths)
    return widths, n_best


def check_outputs(outputs, sources, pieces, options):
    batch_size = len(sources)
    widths, n_best = expected_widths(options, batch_size)
    n_out = max([1, *n_best])
    assert set(outputs) == {"translations", "scores", "alignments", "beam_size", "truncated",
                            "empty_source"}
    assert outputs["alignments"].shape == (batch_size, n_out)  # "" where not asked for
    assert outputs["translations"].dtype == tf.string
    assert outputs["translations"].shape == (batch_size, n_out)
    assert outputs["scores"].dtype == tf.float32 and outputs["scores"].shape == (batch_size, n_out)
    for name, dtype in (("beam_size", tf.int32), ("truncated", tf.bool),
                        ("empty_source", tf.bool)):
        assert outputs[name].dtype == dtype and outputs[name].shape == (batch_size,), name
    np.testing.assert_array_equal(outputs["beam_size"], widths)
    empty = pieces == 0
    np.testing.assert_array_equal(outputs["empty_source"], empty)
    np.testing.assert_array_equal(outputs["truncated"], pieces > MAX_SOURCE_LENGTH - 1)

    texts = outputs["translations"].numpy()
    scores = outputs["scores"].numpy()
    for row in range(batch_size):
        for column in range(n_out):
            texts[row, column].decode("utf-8")  # valid UTF-8
        if empty[row]:
            assert texts[row, 0] == b"" and scores[row, 0] == 0.0, row
        else:
            assert math.isfinite(scores[row, 0]) and scores[row, 0] <= 0.0, (row, scores[row])
        # Columns past the row's own n-best size are padding.
        assert all(texts[row, n_best[row]:] == b"")
        assert all(scores[row, n_best[row]:] == -np.inf)


def run_batches(loaded, tokenizer, batches):
    """Send `(sources, options or None)` batches; returns the number of sources answered."""
    answered = 0
    for sources, options in batches:
        pieces = piece_counts(tokenizer, sources)
        inputs = tf.constant(sources, tf.string)
        if options is None:
            outputs = loaded.signatures["serving_default"](sources=inputs)
        else:
            outputs = loaded.signatures["translate"](sources=inputs, **options)
        check_outputs(outputs, sources, pieces, options)
        answered += len(sources)
    return answered


def generated_batches(rng, inputs, count, max_batch=48, long_every=12):
    """Mixed batches: random kinds, random sizes, random options or the defaults."""
    batches = []
    for index in range(count):
        size = rng.randint(1, max_batch)
        sources = [getattr(inputs, rng.choice(SHORT_KINDS))() for _ in range(size)]
        if index % long_every == 0:
            sources[rng.randrange(size)] = inputs.long()
        options = None if rng.random() < 0.3 else random_options(rng, size)
        batches.append((sources, options))
    return batches


@pytest.mark.slow  # hundreds of generated requests (issue 37: CI runs it)
def test_generated_inputs_each_give_one_well_formed_row(loaded, tokenizer, verses):
    rng = random.Random(SEED)
    inputs = Inputs(rng, verses)
    batches = []
    # Whole batches of sources without a piece, through each width (the
    # empty-list TensorArray failure of every row in a group having no piece).
    for kind in NO_PIECE_KINDS:
        for width in WIDTHS:
            size = rng.randint(1, 16)
            sources = [getattr(inputs, kind)() for _ in range(size)]
            batches.append((sources, signature_options(
                beam_size=width, num_hypotheses=rng.choice([1, width]))))
        batches.append(([getattr(inputs, kind)() for _ in range(8)], None))
    # 512 of them, in two requests at the export's source limit.
    batches += [([b""] * MAX_REQUEST_SOURCES, None)] * 2
    batches.append(([inputs.long() for _ in range(3)], None))
    batches += generated_batches(rng, inputs, count=40)

    sources = [source for batch, _ in batches for source in batch]
    pieces = piece_counts(tokenizer, sources)
    # The fuzz covers what it means to: sources with and without pieces, long ones.
    no_piece = [getattr(inputs, kind)() for kind in NO_PIECE_KINDS for _ in range(20)]
    assert all(piece_counts(tokenizer, no_piece) == 0)
    assert (pieces == 0).sum() > 600 and (pieces > 0).sum() > 400
    assert (pieces > MAX_SOURCE_LENGTH - 1).sum() >= 3

    answered = run_batches(loaded, tokenizer, batches)
    assert answered == len(sources) > 1_000


@pytest.mark.slow
def test_more_generated_inputs(loaded, tokenizer, verses):
    rng = random.Random(SEED + 1)
    batches = generated_batches(rng, Inputs(rng, verses), count=200, max_batch=64,
                                long_every=5)
    assert run_batches(loaded, tokenizer, batches) > 5_000


BAD_LENGTH_PENALTIES = [float("nan"), float("inf"), float("-inf"), MAX_LENGTH_PENALTY + 0.5,
                        1e30]


@pytest.mark.parametrize("signature_batch", [0, 1, 5], ids=lambda size: f"batch{size}")
def test_non_finite_or_out_of_range_length_penalty_is_refused(loaded, verses, signature_batch):
    rng = random.Random(SEED + signature_batch)
    inputs = Inputs(rng, verses)
    translate = loaded.signatures["translate"]
    sources = tf.constant([inputs.verse() for _ in range(signature_batch)], tf.string)
    for bad in BAD_LENGTH_PENALTIES:
        values = [bad]
        if signature_batch > 1:  # one bad row among good ones
            values = [0.6] * signature_batch
            values[rng.randrange(signature_batch)] = bad
        with pytest.raises(tf.errors.InvalidArgumentError) as info:
            translate(sources=sources, **signature_options(beam_size=BEAM,
                                                           length_penalty=values))
        message = info.value.message
        assert "`length_penalty` must be finite and in [0, 10]" in message, message
        assert "Received: length_penalty=" in message


@pytest.mark.parametrize("option", sorted(DTYPES))
def test_an_option_of_a_wrong_length_is_refused_by_name(loaded, option):
    options = signature_options(**{option: ["", ""] if option == "target_prefix" else [-1, -1]})
    with pytest.raises(tf.errors.InvalidArgumentError) as info:
        loaded.signatures["translate"](sources=tf.constant(["a", "b", "c"]), **options)
    assert f"`{option}` must hold one" in info.value.message
    assert "or one per source" in info.value.message

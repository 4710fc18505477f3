import gzip
import zlib

import pytest

from tf_outheads.data import CleaningReport
from tf_outheads.data import CorpusError
from tf_outheads.data import ParallelCorpus
from tf_outheads.data import clean
from tf_outheads.data import read_parallel_files
from tf_outheads.data import read_tsv

from tests.corpus import write_corpus_slice

HEADER = "ref\tsplit\tes\ten_web\ten_kjv\n"
ROWS = [
    "Genesis 1:1\ttrain\tEN el principio crió Dios los cielos y la tierra.\t"
    "In the beginning, God created the heavens and the earth.\t"
    "In the beginning God created the heaven and the earth.\n",
    "Genesis 1:3\ttrain\tY dijo Dios: Sea la luz: y fué la luz.\t"
    "God said, “Let there be light,” and there was light.\t"
    "And God said, Let there be light: and there was light.\n",
    "Amos 1:1\ttest\tLAS palabras de Amós.\tThe words of Amos.\tThe words of Amos.\n",
]


def write_bytes(path, content):
    path.write_bytes(content)
    return path


def write_tsv(tmp_path, lines, name="corpus.tsv"):
    return write_bytes(tmp_path / name, "".join(lines).encode("utf-8"))


# --- read_tsv on the embedded corpus -------------------------------------------------


@pytest.mark.parametrize(
    "split, size",
    [("train", 27952), ("dev", 1068), ("test", 1074), (None, 27952 + 1068 + 1074)],
    ids=["train", "dev", "test", "all"],
)
def test_read_tsv_real_corpus_split_sizes(bible_corpus_path, split, size):
    corpus = read_tsv(bible_corpus_path, split=split)
    assert len(corpus) == size
    assert len(corpus.targets) == len(corpus.references["en_kjv"]) == len(corpus.ids) == size


def test_read_tsv_real_corpus_references_aligned(bible_corpus_path):
    corpus = read_tsv(bible_corpus_path, split="train")
    index = corpus.ids.index("John 3:16")
    assert corpus.sources[index].startswith("Porque de tal manera amó Dios al mundo")
    assert corpus.targets[index].startswith("For God so loved the world, that he gave")
    assert corpus.references["en_kjv"][index].startswith(
        "For God so loved the world, that he gave his only begotten Son"
    )
    # Every row agrees with an independent read of the raw file.
    with gzip.open(bible_corpus_path, "rt", encoding="utf-8") as stream:
        rows = [line.rstrip("\n").split("\t") for line in stream][1:]
    train_rows = [row for row in rows if row[1] == "train"]
    assert corpus.ids == [row[0] for row in train_rows]
    assert corpus.sources == [row[2].strip() for row in train_rows]
    assert corpus.references["en_kjv"] == [row[4].strip() for row in train_rows]


def test_read_tsv_dev_split_holds_whole_held_out_books(bible_corpus_path):
    corpus = read_tsv(bible_corpus_path, split="dev")
    assert "Galatians 1:1" in corpus.ids
    assert not any(ref.startswith("Genesis ") for ref in corpus.ids)


# --- read_tsv errors ------------------------------------------------------------------


def test_read_tsv_plain_and_gzip_files(tmp_path):
    plain = write_tsv(tmp_path, [HEADER] + ROWS)
    zipped = write_bytes(
        tmp_path / "corpus.tsv.gz", gzip.compress("".join([HEADER] + ROWS).encode("utf-8"))
    )
    for path in (plain, zipped):
        corpus = read_tsv(path)
        assert corpus.ids == ["Genesis 1:1", "Genesis 1:3"]
        assert corpus.targets[1] == "God said, “Let there be light,” and there was light."
        assert corpus.references["en_kjv"][0] == (
            "In the beginning God created the heaven and the earth."
        )


def test_read_tsv_crlf_line_endings(tmp_path):
    path = write_tsv(tmp_path, [line.replace("\n", "\r\n") for line in [HEADER] + ROWS])
    corpus = read_tsv(path, split="test")
    assert corpus.sources == ["LAS palabras de Amós."]
    assert corpus.references == {"en_kjv": ["The words of Amos."]}


def test_read_tsv_empty_file(tmp_path):
    path = write_bytes(tmp_path / "empty.tsv", b"")
    with pytest.raises(CorpusError, match="empty") as info:
        read_tsv(path)
    assert str(path) in str(info.value)


def test_read_tsv_missing_column(tmp_path):
    path = write_tsv(tmp_path, [HEADER] + ROWS)
    with pytest.raises(CorpusError) as info:
        read_tsv(path, target="en_bbe")
    message = str(info.value)
    assert f"{path}:1:" in message
    assert "'en_bbe'" in message
    assert "ref, split, es, en_web, en_kjv" in message


def test_read_tsv_missing_reference_column(tmp_path):
    path = write_tsv(tmp_path, ["ref\tsplit\tes\ten_web\n", "a\ttrain\tuno\tone\n"])
    with pytest.raises(CorpusError, match="'en_kjv'") as info:
        read_tsv(path)
    assert f"{path}:1:" in str(info.value)


def test_read_tsv_wrong_field_count(tmp_path):
    broken = "Genesis 1:2\ttrain\tY la tierra estaba desordenada\tThe earth was formless\n"
    path = write_tsv(tmp_path, [HEADER, ROWS[0], broken, ROWS[1]])
    with pytest.raises(CorpusError) as info:
        read_tsv(path)
    message = str(info.value)
    assert f"{path}:3:" in message
    assert "found 4" in message and "expected 5" in message


def test_read_tsv_invalid_utf8_on_line_3(tmp_path):
    bad_row = b"Genesis 1:2\ttrain\tY la tierra \xff\xfe\tx\ty\n"
    content = (HEADER + ROWS[0]).encode("utf-8") + bad_row
    path = write_bytes(tmp_path / "latin.tsv", content)
    with pytest.raises(CorpusError, match="UTF-8") as info:
        read_tsv(path)
    assert f"{path}:3:" in str(info.value)


def test_read_tsv_invalid_utf8_in_gzip(tmp_path):
    content = (HEADER + ROWS[0] + ROWS[1]).encode("utf-8") + "Amós\ttest\t\tx\ty\n".encode(
        "latin-1"
    )
    path = write_bytes(tmp_path / "latin.tsv.gz", gzip.compress(content))
    with pytest.raises(CorpusError, match="UTF-8") as info:
        read_tsv(path, split=None)
    assert f"{path}:4:" in str(info.value)


def test_read_tsv_empty_split(tmp_path):
    path = write_tsv(tmp_path, [HEADER] + ROWS)
    with pytest.raises(CorpusError) as info:
        read_tsv(path, split="dev")
    message = str(info.value)
    assert str(path) in message
    assert "split='dev'" in message
    assert "'test', 'train'" in message


def test_read_tsv_header_without_rows(tmp_path):
    path = write_tsv(tmp_path, [HEADER])
    with pytest.raises(CorpusError, match="no data rows") as info:
        read_tsv(path, split=None)
    assert str(path) in str(info.value)


def test_read_tsv_without_id_column_uses_path_and_line(tmp_path):
    path = write_tsv(tmp_path, [HEADER] + ROWS)
    corpus = read_tsv(path, split=None, id_column=None, references=())
    assert corpus.ids == [f"{path}:2", f"{path}:3", f"{path}:4"]
    assert corpus.references == {}


# --- read_parallel_files ---------------------------------------------------------------


def test_read_parallel_files(tmp_path):
    source = write_bytes(tmp_path / "train.src", "Y dijo Dios\n\n  Sea la luz \n".encode())
    target = write_bytes(tmp_path / "train.tgt", b"God said\n\n  Let there be light \n")
    kjv = write_bytes(tmp_path / "train.kjv", b"And God said\nx\nLet there be light")
    corpus = read_parallel_files(source, target, {"kjv": kjv})
    # Only the newline is removed: empty lines and inner spaces are kept.
    assert corpus.sources == ["Y dijo Dios", "", "  Sea la luz "]
    assert corpus.targets == ["God said", "", "  Let there be light "]
    assert corpus.references == {"kjv": ["And God said", "x", "Let there be light"]}
    assert corpus.ids == [f"{source}:1", f"{source}:2", f"{source}:3"]


def test_read_parallel_files_mismatched_counts(tmp_path):
    source = write_bytes(tmp_path / "train.src", b"uno\ndos\ntres\n")
    target = write_bytes(tmp_path / "train.tgt", b"one\ntwo\n")
    with pytest.raises(CorpusError) as info:
        read_parallel_files(source, target)
    message = str(info.value)
    assert f"{source} has 3 lines" in message
    assert f"{target} has 2 lines" in message


def test_read_parallel_files_mismatched_reference(tmp_path):
    source = write_bytes(tmp_path / "train.src", b"uno\ndos\n")
    target = write_bytes(tmp_path / "train.tgt", b"one\ntwo\n")
    reference = write_bytes(tmp_path / "train.ref", b"one\n")
    with pytest.raises(CorpusError) as info:
        read_parallel_files(source, target, {"kjv": reference})
    assert f"{reference} (reference 'kjv') has 1 lines" in str(info.value)


def test_read_parallel_files_invalid_utf8_on_line_3(tmp_path):
    source = write_bytes(tmp_path / "train.src", b"uno\ndos\ntr\xe9s\n")
    target = write_bytes(tmp_path / "train.tgt", b"one\ntwo\nthree\n")
    with pytest.raises(CorpusError, match="UTF-8") as info:
        read_parallel_files(source, target)
    assert f"{source}:3:" in str(info.value)


def test_read_parallel_files_empty_file(tmp_path):
    source = write_bytes(tmp_path / "train.src", b"uno\n")
    target = write_bytes(tmp_path / "train.tgt", b"")
    with pytest.raises(CorpusError, match="empty") as info:
        read_parallel_files(source, target)
    assert str(target) in str(info.value)


# --- ParallelCorpus ---------------------------------------------------------------------


def test_parallel_corpus_rejects_unequal_lengths():
    with pytest.raises(ValueError, match=r"len\(targets\)=1"):
        ParallelCorpus(sources=["uno", "dos"], targets=["one"])
    with pytest.raises(ValueError, match=r"references\['kjv'\]"):
        ParallelCorpus(sources=["uno"], targets=["one"], references={"kjv": []})


def test_parallel_corpus_select_keeps_alignment():
    corpus = ParallelCorpus(
        sources=["uno", "dos", "tres"],
        targets=["one", "two", "three"],
        references={"kjv": ["I", "II", "III"]},
    )
    picked = corpus.select([2, 0])
    assert picked.sources == ["tres", "uno"]
    assert picked.targets == ["three", "one"]
    assert picked.references == {"kjv": ["III", "I"]}
    assert picked.ids == ["3", "1"]
    assert "size=2" in repr(picked)


# --- clean -------------------------------------------------------------------------------


def handcrafted_corpus():
    pairs = [
        # (source, target, removed by)
        ("Y dijo Dios", "God said", None),
        ("", "And the earth", "empty"),
        ("   ", "", "empty"),
        ("La tierra", " \t ", "empty"),
        ("uno dos tres cuatro cinco seis", "one two three four five six", "max_length"),
        ("a b c d e f g", "", "empty"),  # empty wins over max_length
        ("Sea la luz", "Let there be light", None),
        ("luz", "and there was light", "length_ratio"),
        ("uno dos tres cuatro cinco seis siete", "x", "max_length"),  # first filter wins
        ("Amén", "Amen", None),
        ("y vió Dios", "and God saw", None),
        ("a b", "a b c d e", "length_ratio"),
        ("a b", "a b c d", None),  # ratio exactly 2.0 is kept
    ]
    corpus = ParallelCorpus(
        sources=[source for source, _, _ in pairs],
        targets=[target for _, target, _ in pairs],
        references={"kjv": [f"reference {index}" for index in range(len(pairs))]},
    )
    return corpus, [removed_by for _, _, removed_by in pairs]


def test_clean_counts_each_filter_exactly():
    corpus, removed_by = handcrafted_corpus()
    cleaned, report = clean(corpus, max_length=5, max_length_ratio=2.0)
    assert report == CleaningReport(
        total=13, kept=5, removed={"empty": 4, "max_length": 2, "length_ratio": 2}
    )
    assert report.total == report.kept + sum(report.removed.values())
    assert cleaned.sources == [
        source for source, why in zip(corpus.sources, removed_by) if why is None
    ]


def test_clean_keeps_references_and_ids_aligned():
    corpus, removed_by = handcrafted_corpus()
    cleaned, _ = clean(corpus, max_length=5, max_length_ratio=2.0)
    kept = [index for index, why in enumerate(removed_by) if why is None]
    assert cleaned.targets == [corpus.targets[i] for i in kept]
    assert cleaned.references["kjv"] == [f"reference {i}" for i in kept]
    assert cleaned.ids == [corpus.ids[i] for i in kept]


def test_clean_disabled_filters_are_not_reported():
    corpus, _ = handcrafted_corpus()
    cleaned, report = clean(corpus, drop_empty=False)
    assert report.removed == {}
    assert len(cleaned) == len(corpus)
    _, report = clean(corpus)
    assert report.removed == {"empty": 4}


def test_clean_report_string_has_one_line_per_filter():
    corpus, _ = handcrafted_corpus()
    _, report = clean(corpus, max_length=5, max_length_ratio=2.0)
    lines = str(report).splitlines()
    assert lines[0] == "kept 5 of 13 pairs (38.5%)"
    assert lines[1:] == [
        "  empty: removed 4 pairs",
        "  max_length: removed 2 pairs",
        "  length_ratio: removed 2 pairs",
    ]


@pytest.mark.parametrize(
    "arguments",
    [{"max_length": 0}, {"max_length": 2.5}, {"max_length_ratio": 0.5}],
    ids=["zero_length", "float_length", "ratio_below_one"],
)
def test_clean_rejects_bad_arguments(arguments):
    corpus, _ = handcrafted_corpus()
    with pytest.raises(ValueError, match="Received: "):
        clean(corpus, **arguments)


def test_clean_real_corpus_ratio_filter(bible_slice):
    cleaned, report = clean(bible_slice, max_length=80, max_length_ratio=3.0)
    assert report.total == len(bible_slice) == 2000
    assert report.kept == len(cleaned) == len(cleaned.references["en_kjv"])
    for source, target in zip(cleaned.sources, cleaned.targets):
        lengths = len(source.split()), len(target.split())
        assert 0 < min(lengths) and max(lengths) <= 80
        assert max(lengths) / min(lengths) <= 3.0


# --- strip_suffixes: the WEB export's appended headings ----------------------

PSALM_145_HEADING = "A praise psalm by David."


def test_strip_suffixes_removes_the_appended_heading_from_real_dev_verses(bible_corpus_path):
    from tf_outheads.data import strip_suffixes

    dev = read_tsv(bible_corpus_path, split="dev")
    carrying = [i for i, text in enumerate(dev.targets) if text.endswith(PSALM_145_HEADING)]
    assert carrying, "the embedded dev split should carry the artifact this test is about"
    stripped, counts = strip_suffixes(dev, [PSALM_145_HEADING])
    assert counts == {PSALM_145_HEADING: len(carrying)}
    assert stripped.ids == dev.ids and stripped.sources == dev.sources
    assert stripped.references == dev.references  # only targets by default
    for i in carrying:
        assert stripped.targets[i] == dev.targets[i][: -len(PSALM_145_HEADING)].rstrip()
        assert not stripped.targets[i].endswith(" ")
    untouched = set(range(len(dev))) - set(carrying)
    assert all(stripped.targets[i] == dev.targets[i] for i in untouched)


def test_strip_suffixes_only_at_the_end_and_repeatedly():
    from tf_outheads.data import strip_suffixes

    corpus = ParallelCorpus(
        sources=["a", "b", "c"],
        targets=["Selah. Amen. Selah.", "Selah in the middle.", "Amen.Amen."],
        references={"kjv": ["Amen. Selah.", "x", "y"]},
    )
    stripped, counts = strip_suffixes(corpus, ["Selah.", "Amen."], fields=("targets", "references"))
    assert stripped.targets == ["", "Selah in the middle.", ""]
    assert stripped.references["kjv"] == ["", "x", "y"]
    assert counts == {"Selah.": 3, "Amen.": 4}


@pytest.mark.parametrize(
    "arguments, message",
    [({"suffixes": [""]}, "non-empty"), ({"suffixes": ["x"], "fields": ["target"]}, "fields")],
)
def test_strip_suffixes_rejects_bad_arguments(arguments, message):
    from tf_outheads.data import strip_suffixes

    corpus = ParallelCorpus(sources=["a"], targets=["b"])
    with pytest.raises(ValueError, match=message):
        strip_suffixes(corpus, **arguments)


def test_clean_drops_pairs_containing_boilerplate():
    corpus = ParallelCorpus(sources=["a b", "c d", "e"], targets=["x Selah. y", "x y", ""])
    cleaned, report = clean(corpus, drop_containing=["Selah."])
    assert cleaned.targets == ["x y"]
    assert report.removed == {"empty": 1, "contains": 1}
    with pytest.raises(ValueError, match="drop_containing"):
        clean(corpus, drop_containing=[""])


def test_zoo_splits_hold_no_web_artifacts():
    from tf_outheads_zoo.presets import BIBLE_WEB_ARTIFACTS, preset_config
    from tf_outheads_zoo.splits import load_splits

    messages = []
    splits = load_splits(preset_config("lstm-cpu").data, log=messages.append)
    for split, corpus in splits.items():
        assert not any(s in t for t in corpus.targets for s in BIBLE_WEB_ARTIFACTS), split
    assert sum("stripped appended boilerplate" in m for m in messages) == 3
    # the test split keeps every verse: stripping never drops a pair
    assert len(splits["test"]) == len(read_tsv(preset_config("lstm-cpu").data.corpus,
                                               split="test"))


# --- byte order marks and damaged gzip files --------------------------------------------

BOM = "\ufeff".encode("utf-8")


def truncated_gzip(tmp_path, source_path, size, name):
    """Writes the first `size` bytes of the gzip file `source_path` to `tmp_path / name`.

    Returns the path and the 1-based line at which reading must stop: one past
    the complete lines that those bytes decompress to.
    """
    data = open(source_path, "rb").read()[:size]
    complete_lines = zlib.decompressobj(wbits=31).decompress(data).count(b"\n")
    return write_bytes(tmp_path / name, data), complete_lines + 1


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "gzip"])
def test_read_tsv_skips_a_leading_byte_order_mark(tmp_path, compressed):
    path = write_corpus_slice(tmp_path / "slice.tsv", train=5, dev=2, test=2)
    content = open(path, "rb").read()
    with_bom = BOM + content
    if compressed:
        with_bom = gzip.compress(with_bom)
    bom_path = write_bytes(tmp_path / ("bom.tsv.gz" if compressed else "bom.tsv"), with_bom)
    expected = read_tsv(path, split=None)
    corpus = read_tsv(bom_path, split=None)
    assert corpus.ids == expected.ids and corpus.ids[0] == "Genesis 1:1"
    assert corpus.sources == expected.sources and corpus.targets == expected.targets
    assert corpus.references == expected.references


def test_read_parallel_files_skips_a_leading_byte_order_mark_only(tmp_path, bible_slice):
    sources, targets = bible_slice.sources[:3], bible_slice.targets[:3]
    source = write_bytes(tmp_path / "train.es", BOM + "\n".join(sources).encode("utf-8"))
    target = write_bytes(
        tmp_path / "train.en.gz",
        gzip.compress(BOM + "\n".join(targets).encode("utf-8")),
    )
    # A mark inside the file (two files concatenated) is text, and stays.
    reference = write_bytes(
        tmp_path / "train.kjv",
        BOM + b"first\n" + BOM + b"second\nthird\n",
    )
    corpus = read_parallel_files(source, target, {"kjv": reference})
    assert corpus.sources == sources and corpus.targets == targets
    assert corpus.references["kjv"] == ["first", "\ufeffsecond", "third"]


def test_read_tsv_truncated_gzip_names_file_and_line(tmp_path, bible_corpus_path):
    path, line = truncated_gzip(tmp_path, bible_corpus_path, 40_000, "cut.tsv.gz")
    with pytest.raises(CorpusError) as info:
        read_tsv(path, split=None)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}: ")
    assert "truncated or damaged" in message
    assert isinstance(info.value.__cause__, EOFError)


def test_read_parallel_files_truncated_gzip_names_the_file(tmp_path, bible_corpus_path):
    source = write_bytes(tmp_path / "train.es", b"uno\ndos\n")
    target, line = truncated_gzip(tmp_path, bible_corpus_path, 20_000, "train.en.gz")
    with pytest.raises(CorpusError) as info:
        read_parallel_files(source, target)
    assert str(info.value).startswith(f"{target}:{line}: ")


def test_read_tsv_file_named_gz_that_is_not_gzip(tmp_path):
    path = write_tsv(tmp_path, [HEADER] + ROWS, name="plain.tsv.gz")
    with pytest.raises(CorpusError, match="not a gzip file") as info:
        read_tsv(path)
    assert str(info.value).startswith(f"{path}:1: ")

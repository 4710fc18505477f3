"""Session fixtures shared across the test suite: a real slice of the Bible corpus."""

import os
import pathlib

import pytest

# CTranslate2's OpenMP threads spin while they wait for work (OMP_WAIT_POLICY=ACTIVE is
# its runtime's default); beside a second test worker they take the cores that worker
# needs: tests/export/test_ctranslate2.py ran in 89.6 s beside a training, 33.3 s with
# passive waits. Set before any test imports ctranslate2; a value given outside wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

BIBLE_CORPUS_PATH = (
    pathlib.Path(__file__).resolve().parents[1] / "tf_outheads_zoo" / "data" / "bible-es-en.tsv.gz"
)


_DOCS_DIRECTORIES = ("tutorials", "benchmarks")
# Session fixtures that are costly (tests/export's: SavedModel exports of every head):
# the tests that use them share one worker under xdist.
_SHARED_SESSION_FIXTURES = {"export_of"}
_ROOT = pathlib.Path(__file__).resolve().parent


def _parts(item):
    return pathlib.Path(str(item.path)).resolve().relative_to(_ROOT).parts


def pytest_itemcollected(item):
    """Every test gets an `xdist_group`, for README's test command (`pytest -n 2`, with
    `--dist loadgroup` from setup.cfg): a file's tests run in one worker process, so
    its module fixtures (a trained run, a tokenizer) are built once; so do all the
    tests that use tests/export's exports (`_SHARED_SESSION_FIXTURES`: SavedModels of
    every head, ~60 s), whichever file they are in. The other files of tests/export
    (the CTranslate2 export, the int8 copies: models of their own) are groups of their
    own, so that the two workers share them (in one group they were half of the fast
    suite's time on one worker). Set here, as each test is collected: xdist reads the
    groups in its own `pytest_collection_modifyitems`, which may run before ours."""
    parts = _parts(item)
    shared = _SHARED_SESSION_FIXTURES & set(getattr(item, "fixturenames", ()))
    group = "export-session" if shared else "/".join(parts)
    item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_modifyitems(config, items):
    """The slow tests of tests/tutorials and tests/benchmarks (they run the scripts of
    tutorials/ and benchmarks/) also carry the `docs` marker: `pytest -m docs` runs them
    alone (`pytest -m slow` runs every slow test, the `docs` ones included)."""
    for item in items:
        parts = _parts(item)
        if parts and parts[0] in _DOCS_DIRECTORIES and item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.docs)


@pytest.fixture(scope="session")
def bible_corpus_path():
    """str. Path of the embedded Spanish→English Bible corpus."""
    return str(BIBLE_CORPUS_PATH)


@pytest.fixture(scope="session")
def bible_slice():
    """`ParallelCorpus` of the first 2000 train verses (es → en_web, en_kjv reference)."""
    from tf_outheads.data import read_tsv

    return read_tsv(BIBLE_CORPUS_PATH, split="train").select(range(2000))


@pytest.fixture(scope="session")
def bible_tokenizer(bible_slice, tmp_path_factory):
    """Joint BPE `SubwordTokenizer` (vocabulary ~1000) trained on `bible_slice`."""
    from tf_outheads.data import build_tokenizers

    tokenizer, _ = build_tokenizers(
        bible_slice.sources,
        bible_slice.targets,
        tmp_path_factory.mktemp("bible_tokenizer"),
        vocab_size=1000,
    )
    return tokenizer

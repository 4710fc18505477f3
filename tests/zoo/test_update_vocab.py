"""`train --init-from RUN --update-vocab merge|replace`: the child's pieces come from its
new data; every table moves by piece; kept pieces keep their rows and, merged, a
sentence of kept pieces scores as under the parent (through the Scorer)."""

import json

import numpy as np
import pytest

from tests.corpus import write_corpus_slice
from tests.zoo.test_init_from import HEADS, _train
from tf_outheads.data import piece_map, read_tsv
from tf_outheads.decoding.scoring import Scorer
from tf_outheads.models import piece_tables
from tf_outheads_zoo.runs import load_run

# The child trains one step at a learning rate of 0: its model.keras is its start.
FROZEN = ["--max-steps", "1", "--set", "train.learning_rate=0.0"]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """The parent's 300 verses, the child's 1,200 (other chapters: other words)."""
    directory = tmp_path_factory.mktemp("corpora")
    return (write_corpus_slice(directory / "parent.tsv", 300, 30, 10),
            write_corpus_slice(directory / "child.tsv", 1200, 30, 10))


def _check(parent_dir, child_dir, mode, corpus, score=True):
    parent, *parent_tokenizers, _ = load_run(str(parent_dir))
    child, *child_tokenizers, _ = load_run(str(child_dir))
    record = json.loads((child_dir / "init_from.json").read_text(encoding="utf-8"))
    assert record["update_vocab"] == mode
    maps = [piece_map(p, c) for p, c in zip(parent_tokenizers, child_tokenizers)]
    assert (maps[1] < 0).any(), "the new data brought no new piece"
    if mode == "merge":  # every parent piece kept, at its own id
        for mapping, tokenizer in zip(maps, parent_tokenizers):
            np.testing.assert_array_equal(mapping[:tokenizer.vocab_size],
                                          np.arange(tokenizer.vocab_size))
    else:
        assert child_tokenizers[1].fingerprint != parent_tokenizers[1].fingerprint
    for old, new in zip(piece_tables(parent), piece_tables(child)):
        mapping = maps[0 if new.side == "source" else 1]
        kept = np.flatnonzero(mapping >= 0)
        np.testing.assert_allclose(new.read()[kept], old.read()[mapping[kept]], atol=1e-6,
                                   err_msg=new.name)
    if not score:
        return
    dev = read_tsv(corpus, split="dev")
    same = []  # short dev phrases both runs cut into the same pieces, on both sides
    phrases = [(" ".join(s.split()[:n]), " ".join(t.split()[:n]))
               for s, t in zip(dev.sources, dev.targets) for n in (2, 4)]
    for pair in phrases:
        cut = [tokenizer.pieces([text])[0] for tokenizer, text in zip(parent_tokenizers, pair)]
        if cut == [tokenizer.pieces([text])[0]
                   for tokenizer, text in zip(child_tokenizers, pair)]:
            same.append(pair)
    assert len(same) >= 10, len(same)
    for model in (parent, child):
        if getattr(model.head, "scoring", None) == "posterior":
            # A continuous head's posterior normalises over the table, new pieces' rows
            # included; its vMF likelihood of a piece depends on that piece alone.
            model.head.scoring = "log_likelihood"
    theirs = Scorer(parent, *parent_tokenizers).score(*map(list, zip(*same)))
    ours = Scorer(child, *child_tokenizers).score(*map(list, zip(*same)))
    np.testing.assert_allclose([r["log_prob"] for r in ours],
                               [r["log_prob"] for r in theirs], rtol=1e-5, atol=1e-4)


@pytest.mark.slow  # two CLI trainings (~30 s)
def test_a_merged_vocabulary_keeps_the_parents_rows_and_scores(corpora, tmp_path):
    parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
    _train(parent_dir, corpora[0], "--preset", "lstm-tiny", "--max-steps", "4")
    _train(child_dir, corpora[1], "--init-from", str(parent_dir), "--update-vocab", "merge",
           *FROZEN)
    _check(parent_dir, child_dir, "merge", corpora[0])
    # The new data's own models, built beside the parent's copies.
    assert (child_dir / "new" / "tokenizer.json").exists()
    assert (child_dir / "parent" / "tokenizer.json").exists()


@pytest.mark.slow  # a parent and two children per head: ~1.5 min
@pytest.mark.parametrize("head", ["joint", "shared-private", "vmf"])
def test_every_head_moves_its_tables_by_piece(corpora, tmp_path, head):
    if head == "shared-private":
        pytest.importorskip("eflomal")
    parent_dir = tmp_path / "parent"
    _train(parent_dir, corpora[0], "--preset", "lstm-tiny", "--max-steps", "4", *HEADS[head])
    for mode in ("merge", "replace"):
        child_dir = tmp_path / mode
        _train(child_dir, corpora[1], "--init-from", str(parent_dir), "--update-vocab", mode,
               *FROZEN)
        _check(parent_dir, child_dir, mode, corpora[0], score=mode == "merge")
    if head == "vmf":
        text = (tmp_path / "merge" / "init_from.json").read_text()
        assert json.loads(text)["update_vocab"] == "merge"


def test_update_vocab_needs_init_from_and_a_fresh_optimizer(corpora, tmp_path, capsys):
    from tf_outheads_zoo.schema import ConfigError
    from tf_outheads_zoo.init_from import check_compatible
    from tf_outheads_zoo.presets import preset_config

    with pytest.raises(SystemExit):
        _train(tmp_path / "a", corpora[1], "--preset", "lstm-tiny", "--update-vocab", "merge")
    assert "train.update_vocab applies to a run started from another" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    parent = preset_config("lstm-tiny")
    child = preset_config("lstm-tiny", {"train.update_vocab": "merge", "data.vocab_size": 500})
    check_compatible(parent, child, "P")  # a vocabulary update may change the size
    with pytest.raises(ConfigError, match="starts a fresh optimizer"):
        check_compatible(parent, child.with_overrides({"train.init_optimizer": True}), "P")
    with pytest.raises(ConfigError, match="data.vocab_size"):
        check_compatible(parent, preset_config("lstm-tiny", {"data.vocab_size": 500}), "P")

"""`data.subword_sampling` in a run: checked settings; sampled training batches, while
dev, test, decoding and the run's tokenizer keep the best segmentation."""

import functools
import json
import os

import pytest

from tests.corpus import write_corpus_slice
from tf_outheads.data import EOS_ID, PAD_ID, load_tokenizers
from tf_outheads.training import strategy as tfo_strategy
from tf_outheads_zoo import cli
from tf_outheads_zoo import train as zoo_train
from tf_outheads_zoo.components import check_components
from tf_outheads_zoo.presets import get_preset, preset_config
from tf_outheads_zoo.runs import stored_run
from tf_outheads_zoo.schema import ConfigError

SAMPLING = {"nbest_size": 16, "alpha": 0.1}


@pytest.mark.parametrize("value, message", [
    ({"nbest_size": -1, "alpha": 0.1}, r"data.subword_sampling: .*cannot be seeded"),
    ({"nbest_size": 8, "alpha": -2}, r"data.subword_sampling: .*alpha=-2"),
    ({"nbest_size": 8}, r"data.subword_sampling"),
])
def test_bad_settings_are_refused_naming_the_key(value, message):
    with pytest.raises(ConfigError, match=message):
        get_preset("lstm-tiny", {"data.subword_sampling": value,
                                 "data.tokenizer_type": "unigram"})


def test_a_bpe_run_with_subword_sampling_is_refused_before_anything_is_written():
    config = preset_config("lstm-tiny", {"data.subword_sampling": SAMPLING})
    with pytest.raises(ConfigError, match="set data.tokenizer_type: unigram"):
        check_components(config)


def _targets(dataset, tokenizer, batches=None):
    """`{target text: {its piece sequences}}` of the first `batches` batches."""
    seen = {}
    for index, (_, target_out) in enumerate(dataset):
        if batches is not None and index == batches:
            break
        for row in target_out.numpy():
            ids = [int(i) for i in row if i != PAD_ID]
            assert ids[-1] == EOS_ID
            text = tokenizer.decode_to_text([ids])[0]
            seen.setdefault(text, set()).add(tuple(ids[:-1]))
    return seen


@pytest.mark.slow  # a CLI training, 75 s: the fast suite's 10-minute budget (issue 55)
def test_a_sampled_run_trains_and_only_its_training_batches_are_sampled(tmp_path):
    corpus = write_corpus_slice(tmp_path / "small.tsv", 300, 20, 20)
    run_dir = str(tmp_path / "run")
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", corpus,
              "--max-steps", "6", "--set", "data.vocab_size=400",
              "--set", "data.tokenizer_type=unigram",
              "--set", f"data.subword_sampling={json.dumps(SAMPLING)}",
              "--set", "train.steps_per_epoch=3", "--set", "decode.max_length_offset=3"])
    with open(os.path.join(run_dir, "results.json")) as f:
        assert json.load(f)["steps"] == 6
    with open(os.path.join(run_dir, "run.json")) as f:
        preset = json.load(f)
    assert preset["data"]["subword_sampling"] == SAMPLING
    strategy = tfo_strategy.make_strategy("default")
    data = zoo_train._prepare_data(stored_run(run_dir)[1], run_dir, strategy,
                                   functools.partial(tfo_strategy.chief_first, strategy),
                                   log=lambda *_: None)
    tokenizer = data.target_tokenizer
    assert tokenizer.fingerprint == load_tokenizers(run_dir)[1].fingerprint
    # Dev: each verse once, in its best segmentation.
    dev = _targets(data.dev_dataset, tokenizer)
    assert set(dev) == set(data.splits["dev"].targets)
    for text, segmentations in dev.items():
        assert segmentations == {tuple(tokenizer.tokenize(text).numpy())}
    # Training: verses seen several times come in several segmentations.
    train = _targets(data.train_dataset, tokenizer, batches=120)
    repeated = [s for s in train.values() if len(s) > 1]
    assert len(repeated) > 0.5 * len(train), (len(repeated), len(train))

"""Every preset builds its model and decoder; the VIVO Table 3 presets match the table."""

import dataclasses

import numpy as np
import pytest

from tf_outheads.decoding import Translator
from tf_outheads.layers.continuous_head import ContinuousOutputHead
from tf_outheads.layers.heads import TiedSoftmaxHead
from tf_outheads.metrics import parameter_report
from tf_outheads_zoo.components import build_model, training_loss
from tf_outheads_zoo.presets import PRESETS, get_preset, preset_config
from tf_outheads_zoo.run_pairs import resolve_pairs

VOCAB = 40  # every preset's model at a tiny vocabulary: the layers are what is checked


def _default_run(name):
    """The CPU presets (but the shared-private ones, which align words with eflomal:
    tests/zoo/test_shared_private_models.py builds those models) build in the default
    run; the paper-size ones in the slow set (issue 37)."""
    return (name.startswith(("lstm-cpu", "lstm-tiny", "transformer-cpu"))
            and not name.endswith("shared-private"))


@pytest.mark.parametrize("name", [
    name if _default_run(name) else pytest.param(name, marks=pytest.mark.slow)
    for name in sorted(PRESETS)])
def test_preset_builds_its_model_loss_and_translator(name, bible_slice, bible_tokenizer,
                                                     tmp_path):
    config = preset_config(name)
    assert set(config.to_dict()) == {"description", "data", "model", "train", "decode"}
    assert config.description
    # LSTM presets give hidden_dim, Transformer presets model_dim.
    if config.model.width > 512:
        pytest.skip("large model: test_vivo_table_3_presets builds the 1024 ones")
    vocab = VOCAB
    if config.model.shared_private:
        # Pairs from the run's corpus and tokenizer, as tf_outheads_zoo.train makes them.
        pytest.importorskip("eflomal")
        with pytest.raises(ValueError, match="names pairs still to be built"):
            build_model(config, VOCAB, VOCAB)
        config = dataclasses.replace(config, model=resolve_pairs(
            config.model, bible_slice.select(range(300)), bible_tokenizer, bible_tokenizer,
            str(tmp_path)))
        vocab = bible_tokenizer.vocab_size
    model = build_model(config, vocab, vocab)
    training_loss(config.train)  # a bad loss spec raises
    Translator(model, bible_tokenizer, bible_tokenizer, **config.decode.options())


@pytest.mark.slow  # 1024-unit models (issue 37: CI runs it)
@pytest.mark.parametrize("name, head_type", [("lstm-vivo-vmf", ContinuousOutputHead),
                                             ("lstm-vivo-softmax", TiedSoftmaxHead)])
def test_vivo_table_3_presets(name, head_type, bible_tokenizer):
    preset = get_preset(name)
    assert preset["data"]["vocab_size"] == 50000 and not preset["data"]["joint_vocabulary"]
    assert preset["data"]["max_length"] == 100
    assert preset["decode"]["replace_unk"] is True
    assert preset["train"]["learning_rate"] == (5e-4 if "vmf" in name else 2e-4)
    model = build_model(preset_config(name), 50, 60)
    assert isinstance(model.head, head_type)
    assert len(model.encoder.rnn_layers) == 1 and len(model.decoder.cells) == 2
    assert model.encoder.bidirectional and model.decoder.hidden_dim == 1024
    assert tuple(model.source_embedding.embeddings.shape) == (50, 512)
    assert tuple(model.target_embedding.embeddings.shape) == (60, 300)
    groups = parameter_report(model).groups
    if head_type is ContinuousOutputHead:
        # d_h·m + m trainable, plus the frozen |V|·m table.
        assert groups["output_layer"] == 1024 * 300 + 300 + 60 * 300
        assert preset["train"]["loss"]["class_name"] == "vmf"
    else:
        # Tied: h (1024) is projected (no bias) to the embedding size (300);
        # the output bias has one entry per word.
        assert groups["output_layer"] == 1024 * 300 + 60
    assert np.isfinite(model.count_params())
    Translator(model, bible_tokenizer, bible_tokenizer, **preset["decode"])


def test_shared_private_presets_differ_from_their_vanilla_model_in_embeddings_only():
    # Liu et al. 2019 Tables 1/4: the four Transformer set-ups of each size.
    for size in ("base", "cpu"):
        vanilla = get_preset(f"transformer-{size}")
        assert vanilla["model"]["head"] == "softmax" and vanilla["model"]["shared_private"] is None
        for name, shared_private in (("decoder-wt", None),
                                     ("three-way", {"pairs": "identity",
                                                    "sharing_ratios": [1.0, 1.0, 1.0]}),
                                     ("shared-private", {"pairs": "auto", "threshold": 0.05,
                                                         "sharing_ratios": [0.9, 0.7, 0.5]})):
            preset = get_preset(f"transformer-{size}-{name}")
            assert preset["model"] == dict(vanilla["model"], head="tied",
                                           shared_private=shared_private)
            assert {k: preset[k] for k in ("data", "train", "decode")} == {
                k: vanilla[k] for k in ("data", "train", "decode")}
    base = get_preset("transformer-base")["model"]
    assert (base["model_dim"], base["ffn_dim"], base["num_heads"], base["encoder_layers"],
            base["decoder_layers"]) == (512, 2048, 8, 6, 6)


@pytest.mark.parametrize("setting,value", [
    ("decode.replace_unk", True), ("model.rewe", None), ("train.rewe", None),
    ("model.shared_private", None), ("train.optimizer", "lazy_adam"),
    ("train.learning_rate_schedule", None), ("train.adam_epsilon", 1e-9),
    ("train.adam_beta_2", 0.98), ("train.global_clipnorm", None), ("data.tokenizer_seed", 7)])
def test_documented_keys_are_settable_on_every_preset(setting, value):
    section, _, key = setting.partition(".")
    for name in PRESETS:
        assert get_preset(name, {setting: value})[section][key] == value, name

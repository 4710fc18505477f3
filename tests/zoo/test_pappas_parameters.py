"""Parameter counts of the Pappas et al. 2018 presets: the paper's differences (Tables 2, 3, 5)."""

import pytest

from tf_outheads.metrics import parameter_report
from tf_outheads_zoo.components import model_arguments
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.presets import preset_config

# A small vocabulary keeps the models cheap; the differences below do not
# depend on |V| except untied − tied = |V|·d_h, checked with this |V|.
VOCAB_SIZE = 1000
D = D_H = 512


def report(preset_name):
    model_cls, arguments = model_arguments(preset_config(preset_name))
    assert model_cls is LSTMSeq2Seq
    model = LSTMSeq2Seq(VOCAB_SIZE, VOCAB_SIZE, **arguments)
    return parameter_report(model)


@pytest.fixture(scope="module")
def tied():
    return report("lstm-pappas-tied")


@pytest.mark.parametrize(
    "preset, joint_dim",
    [("lstm-pappas-joint-512", 512), ("lstm-pappas-joint-2048", 2048),
     ("lstm-pappas-joint-4096", 4096)],
)
def test_joint_minus_tied_is_eq16_plus_projection_biases(tied, preset, joint_dim):
    joint = report(preset)
    expected = D * joint_dim + joint_dim * D_H + 2 * joint_dim  # Table 3/5: +0.5M, Table 2: +2.1M
    assert joint.total - tied.total == expected
    assert joint.output_capacity["parameters"] == expected + VOCAB_SIZE
    assert joint.output_capacity["equation"].startswith("Eq. 16")
    # Only the output layer differs.
    assert {k: v for k, v in joint.groups.items() if k != "output_layer"} == {
        k: v for k, v in tied.groups.items() if k != "output_layer"}


def test_untied_minus_tied_is_the_output_matrix(tied):
    untied = report("lstm-pappas")
    assert untied.total - tied.total == VOCAB_SIZE * D_H  # Table 2: 65.0M − 46.7M at |V|≈35.7K
    assert untied.output_capacity["parameters"] == VOCAB_SIZE * D_H + VOCAB_SIZE  # Eq. 8
    assert tied.output_capacity["parameters"] == VOCAB_SIZE  # Eq. 9


@pytest.mark.parametrize("preset", ["lstm-pappas-bilinear", "lstm-pappas-output-structure",
                                    "lstm-pappas-context-structure"])
def test_one_sided_variants_add_one_d_by_dh_matrix(tied, preset):
    # Table 3: Eq. 6 / 7a / 7b all 47.0M vs tied 46.7M, i.e. + d·d_h (+ a bias)
    extra = report(preset).total - tied.total
    assert extra in (D * D_H, D * D_H + D)


def test_each_extra_layer_adds_an_encoder_and_a_decoder_lstm():
    # Table 5: +4.2M per layer (one 512 LSTM layer on each side)
    layer = 4 * (D * D_H + D_H * D_H + D_H)
    two = report("lstm-pappas-joint-512").total
    assert report("lstm-pappas-joint-512-3layer").total - two == 2 * layer
    assert two - report("lstm-pappas-joint-512-1layer").total == 2 * layer

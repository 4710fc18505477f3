"""`tf_outheads.training.objective` after the objective moved to `tf_outheads.losses`.

The old module re-exports the objective's names, and `HeadLossMixin`, deprecated,
still trains a model of one's own (`Seq2SeqModel` no longer inherits it).
"""

import keras
import numpy as np
import pytest

from tf_outheads import MaskedSequenceCrossEntropy, SoftmaxHead, masked_sequence_cross_entropy
from tf_outheads import training
from tf_outheads.losses import objective
from tf_outheads.training import objective as old_objective

VOCAB = 11


@pytest.mark.parametrize("name", objective.__all__)
def test_old_module_reexports_the_objective(name):
    assert getattr(old_objective, name) is getattr(objective, name)


def make_mixin_model():
    with pytest.warns(DeprecationWarning, match="HeadLossMixin"):
        class OwnModel(training.HeadLossMixin, keras.Model):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.embedding = keras.layers.Embedding(VOCAB, 8)
                self.head = SoftmaxHead(VOCAB)

            def call(self, inputs, training=False):
                return self.head_outputs(self.embedding(inputs["target_in"]), training)

    return OwnModel()


def test_head_loss_mixin_still_trains_a_model_of_ones_own():
    rng = np.random.default_rng(0)
    x = {"target_in": rng.integers(4, VOCAB, (4, 5)).astype("int32")}
    y = rng.integers(4, VOCAB, (4, 5)).astype("int32")
    y[:, -2:] = 0  # padding
    model = make_mixin_model()
    model(x)  # built by a call: the model has no `build`
    model.compile(optimizer="sgd", loss=MaskedSequenceCrossEntropy())
    assert isinstance(model.objective, objective.Objective)
    with model.training_outputs():
        assert set(model(x)) == {objective.HIDDEN_OUTPUT}
    expected = float(masked_sequence_cross_entropy(y, model(x)))
    assert model.evaluate(x, y, verbose=0) == pytest.approx(expected, rel=1e-5)
    history = model.fit(x, y, epochs=2, batch_size=4, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    assert history.history["loss"][1] < history.history["loss"][0]
    config = model.get_compile_config()
    assert keras.saving.deserialize_keras_object(config["loss"]).__class__ is (
        MaskedSequenceCrossEntropy)

"""A new head (with its own loss) and a new model are their code and their registration.

The test defines both, registers them (the head in `tf_outheads.registry.HEADS`, its
loss in `LOSSES`, the model by its config section), and trains them through
`tf-outheads train --config` on a slice of the Bible corpus, then translates with
the trained run: no table, preset or CLI description is edited.
"""

import dataclasses
import json

import keras
import pytest
from keras import ops

from tests.corpus import write_corpus_slice
from tf_outheads.layers import SoftmaxHead
from tf_outheads.losses import MaskedSequenceCrossEntropy
from tf_outheads.models import Seq2SeqModel
from tf_outheads.registry import HEADS, LOSSES, register_head, register_loss
from tf_outheads_zoo import cli
from tf_outheads_zoo.model_config import ModelConfig, unregister_model_type
from tf_outheads_zoo.schema import setting

PACKAGE = "tests_new_components"


def define_components():
    """The toy loss, head and model, and the model's config section (which registers it)."""

    @register_loss("toy_cross_entropy")
    @keras.saving.register_keras_serializable(package=PACKAGE)
    class ToyCrossEntropy(MaskedSequenceCrossEntropy):
        """The masked cross-entropy, counting the traces that used it."""

        traces = 0

        def token_losses(self, y_true, outputs, head):
            ToyCrossEntropy.traces += 1
            return super().token_losses(y_true, outputs, head)

    @register_head("toy")
    @keras.saving.register_keras_serializable(package=PACKAGE)
    class ToyHead(SoftmaxHead):
        """A softmax head on tanh(h), which trains with its own loss."""

        def project_hidden(self, h):
            return ops.tanh(h)

        def default_loss(self, label_smoothing=0.0):
            return ToyCrossEntropy(label_smoothing=label_smoothing)

    @keras.saving.register_keras_serializable(package=PACKAGE)
    class ToySeq2Seq(Seq2SeqModel):
        """Mean of the source embeddings as context; a feed-forward decoder."""

        def __init__(self, source_vocabulary_size, target_vocabulary_size, width=16,
                     head="softmax", rewe=None, shared_private=None, **kwargs):
            super().__init__(source_vocabulary_size, target_vocabulary_size, **kwargs)
            self.width = width
            self.build_embeddings(width, width, lambda: keras.initializers.RandomUniform(
                -0.1, 0.1, seed=1), shared_private)
            self.encoder = keras.layers.Dense(width, activation="tanh", name="encoder")
            self.decoder = keras.layers.Dense(width, activation="tanh", name="decoder")
            self.build_heads(head, rewe)

        @property
        def hidden_size(self):
            return self.width

        def build_network(self):
            self.source_embedding.build((None, None))
            self.target_embedding.build((None, None))
            self.encoder.build((None, self.width))
            self.decoder.build((None, 2 * self.width))

        def _source_weights(self, source_ids):
            mask = ops.cast(ops.not_equal(source_ids, 0), "float32")
            return mask / ops.maximum(ops.sum(mask, axis=1, keepdims=True), 1.0)

        def _context(self, source_ids):
            weights = self._source_weights(source_ids)[..., None]
            return self.encoder(ops.sum(self.source_embedding(source_ids) * weights, axis=1))

        def teacher_forced(self, source_ids, target_in, training=False,
                           return_alignments=False):
            embedded = self.target_embedding(target_in)
            context = ops.broadcast_to(self._context(source_ids)[:, None, :],
                                       ops.shape(embedded))
            h = self.decoder(ops.concatenate([embedded, context], axis=-1))
            if not return_alignments:
                return h
            weights = self._source_weights(source_ids)[:, None, :]
            return h, ops.broadcast_to(weights, (ops.shape(h)[0], ops.shape(h)[1],
                                                 ops.shape(weights)[2]))

        def initial_decoding_state(self, source_ids, max_length=None):
            return {"context": self._context(source_ids)}

        def decoder_step(self, ids_t, state):
            h_t = self.decoder(ops.concatenate([self.target_embedding(ids_t),
                                                state["context"]], axis=-1))
            return h_t, state

        def get_config(self):
            return {**super().get_config(), "width": self.width}

    @dataclasses.dataclass(frozen=True)
    class ToyConfig(ModelConfig, model_type="toy", model=ToySeq2Seq):
        "Mean-of-source context, feed-forward decoder (a test's model)."

        width: int = setting(16, "embedding and hidden size")
        small = {"width": 8}

    return ToyCrossEntropy, ToyHead, ToySeq2Seq


@pytest.fixture()
def toy_components():
    components = define_components()
    yield components
    unregister_model_type("toy")
    HEADS.unregister("toy")
    LOSSES.unregister("toy_cross_entropy")


@pytest.mark.slow  # CLI training end to end (about 20 s)
def test_a_registered_head_and_model_train_through_a_run_file_and_translate(
        toy_components, tmp_path):
    toy_loss, toy_head, toy_model = toy_components
    corpus = write_corpus_slice(tmp_path / "small.tsv", 400, 20, 20)
    run_file = tmp_path / "toy.yaml"
    run_file.write_text(
        f"data: {{corpus: {json.dumps(corpus)}, vocab_size: 300}}\n"
        "model: {model_type: toy, width: 24, head: toy}\n"
        "train: {steps_per_epoch: 3, epochs: 2, learning_rate: 0.01}\n"
        "decode: {max_length_offset: 3}\n", encoding="utf-8")
    run_dir = tmp_path / "run"
    cli.main(["train", "--config", str(run_file), "--run-dir", str(run_dir)])

    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    assert results["steps"] == 6 and "bleu[en_web]" in results["test"]
    stored = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert stored["model"] == {"model_type": "toy", "width": 24, "head": "toy", "rewe": None,
                               "shared_private": None, "selection": None}
    assert toy_loss.traces > 0  # the head's own loss trained it (train.loss was None)
    assert len((run_dir / "test.hyp").read_text(encoding="utf-8").splitlines()) == 20

    # The saved run loads as the registered classes and translates.
    from tf_outheads_zoo.runs import load_run

    model = load_run(str(run_dir))[0]
    assert type(model) is toy_model and type(model.head) is toy_head and model.width == 24
    source = tmp_path / "source.txt"
    source.write_text("En el principio creó Dios los cielos y la tierra.\n", encoding="utf-8")
    output = tmp_path / "hyp.txt"
    cli.main(["translate", "--run-dir", str(run_dir), "--input", str(source),
              "--output", str(output), "--beam-size", "2"])
    assert len(output.read_text(encoding="utf-8").splitlines()) == 1

"""The registries of names: models (`tf_outheads_zoo.model_config.MODEL_TYPES`), heads,
losses, optimizers and schedules (`tf_outheads.registry`), and what reads them."""

import dataclasses

import keras
import pytest

from tf_outheads.layers import SoftmaxHead
from tf_outheads.registry import (HEADS, LEARNING_RATE_SCHEDULES, LOSSES, OPTIMIZERS,
                                  Registry)
from tf_outheads_zoo import catalogue
from tf_outheads_zoo.components import build_optimizer, check_components, training_loss
from tf_outheads_zoo.config import RunConfig
from tf_outheads_zoo.lstm import LSTMSeq2Seq
from tf_outheads_zoo.model_config import MODEL_TYPES, ModelConfig, unregister_model_type
from tf_outheads_zoo.presets import preset_config
from tf_outheads_zoo.schema import ConfigError, setting


def test_importing_the_library_registers_its_builtins():
    assert set(HEADS) == {"softmax", "tied", "joint", "continuous"}
    assert set(LOSSES) == {"vmf", "cosine", "mse", "cross_entropy", "sampled_softmax"}
    assert set(OPTIMIZERS) == {"adam", "lazy_adam"}
    assert set(LEARNING_RATE_SCHEDULES) == {"inverse_sqrt"}


def test_register_refuses_a_taken_name_and_accepts_the_same_class_again():
    registry = Registry("head", "model.head")
    registry.register("mine", SoftmaxHead)
    registry.register("mine", SoftmaxHead)  # a module imported twice
    assert registry["mine"] is SoftmaxHead and registry.entry("mine").description

    class Other(SoftmaxHead):
        pass

    with pytest.raises(ValueError, match="'mine' is taken by tf_outheads.layers.heads.SoftmaxHead"):
        registry.register("mine", Other)
    registry.unregister("mine")
    assert registry.register("mine", Other) is Other and "mine" in registry


def test_an_unknown_name_names_the_setting_the_registered_names_and_the_closest():
    with pytest.raises(ValueError) as error:
        OPTIMIZERS.lookup("lazyadam")
    assert str(error.value).startswith("train.optimizer: unknown optimizer 'lazyadam'; "
                                       "did you mean 'lazy_adam'? Registered: adam, lazy_adam")


@pytest.mark.parametrize("overrides, message", [
    ({"model.head": "jiont"}, "model.head: unknown head 'jiont'; did you mean 'joint'?"),
    ({"train.optimizer": "sgd"}, "train.optimizer: unknown optimizer 'sgd'"),
    ({"train.loss": {"class_name": "vmff"}}, "unknown loss 'vmff'; did you mean 'vmf'?"),
    ({"train.learning_rate_schedule": {"name": "noam"}},
     "train.learning_rate_schedule.name: unknown learning-rate schedule 'noam'"),
    ({"train.learning_rate_schedule": {"warmup_steps": 4}}, "needs|must be None or {'name'"),
])
def test_check_components_refuses_a_name_nobody_registered(overrides, message):
    config = RunConfig().with_overrides(overrides)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("?", r"\?")
                       .replace("{", r"\{")):
        check_components(config)


def test_a_name_registered_by_a_user_is_built_from_the_configuration():
    class Scaled(keras.optimizers.SGD):
        """SGD, as a user's own optimizer."""

    OPTIMIZERS.register("user_sgd", Scaled)
    try:
        config = RunConfig().with_overrides({"train.optimizer": "user_sgd"})
        assert check_components(config) is config
        optimizer = build_optimizer(config)
        assert type(optimizer) is Scaled
        assert float(optimizer.learning_rate) == pytest.approx(1e-3)
        assert "user_sgd" in catalogue.components_text()
    finally:
        OPTIMIZERS.unregister("user_sgd")


def test_a_head_trains_with_its_default_loss_unless_train_loss_names_one():
    # No train.loss: the head's default_loss (compile_for_translation), with label smoothing.
    assert training_loss(preset_config("lstm-cpu").train) == {"label_smoothing": 0.1}
    model = LSTMSeq2Seq(30, 30, embedding_dim=8, hidden_dim=8, num_layers=1,
                        head={"class_name": "continuous", "config": {"output_dim": 4}})
    assert type(model.head.default_loss()).__name__ == "VMFLoss"
    with pytest.raises(ValueError, match="no label smoothing"):
        model.head.default_loss(label_smoothing=0.1)
    vmf = training_loss(preset_config("lstm-cpu-vmf").train)["loss"]
    assert (type(vmf).__name__, vmf.norm_penalty, vmf.dot_scale) == ("VMFLoss", 0.02, 0.1)


@pytest.fixture()
def gru_type():
    """A model type registered by its section alone (the class by its import path)."""

    @dataclasses.dataclass(frozen=True)
    class GRUConfig(ModelConfig, model_type="gru_test", model="keras.layers:GRU"):
        "A GRU model (a test's section)."
        units: int = setting(32, "GRU units")

    yield GRUConfig
    unregister_model_type("gru_test")


def test_a_model_type_registers_by_its_section(gru_type):
    assert MODEL_TYPES["gru_test"] is gru_type
    config = RunConfig().with_overrides({"model.model_type": "gru_test", "model.units": 8,
                                         "model.head": "tied"})
    assert config.model.arguments() == {"units": 8, "head": "tied", "rewe": None,
                                        "shared_private": None}
    assert config.model.model_class() is keras.layers.GRU
    assert config.to_dict()["model"]["model_type"] == "gru_test"
    with pytest.raises(ConfigError, match=r"Valid model keys \(model_type 'gru_test'\): "
                                          "head, model_type, rewe, selection, shared_private, "
                                          "units"):
        config.with_overrides({"model.hidden_dim": 8})
    assert "gru_test        A GRU model (a test's section)." in catalogue.components_text()
    # The schema's docs list its keys too.
    assert "| `units` | int | `32` | GRU units |" in catalogue.presets_markdown()


def test_a_model_type_name_is_registered_once(gru_type):
    with pytest.raises(TypeError, match="'gru_test' is registered by"):
        @dataclasses.dataclass(frozen=True)
        class Another(ModelConfig, model_type="gru_test", model="keras.layers:LSTM"):
            pass
    with pytest.raises(ConfigError, match="model.model_type must be one of 'lstm', "
                                          "'transformer', 'gru_test'"):
        RunConfig().with_overrides({"model.model_type": "gru"})


def test_the_components_command_lists_every_registry(capsys):
    from tf_outheads_zoo import cli

    cli.main(["components"])
    out = capsys.readouterr().out
    for registry in (HEADS, LOSSES, OPTIMIZERS, LEARNING_RATE_SCHEDULES):
        assert f"{registry.setting} ({registry.kind} names):" in out
        for name in registry:
            assert f"\n  {name} " in out, name
    for name in MODEL_TYPES:
        assert f"\n  {name} " in out


# -- a run's own components: imports ---------------------------------------------------------

MODULE = '''
import dataclasses

from tf_outheads_zoo.model_config import ModelConfig
from tf_outheads_zoo.schema import setting


@dataclasses.dataclass(frozen=True)
class WideConfig(ModelConfig, model_type="{name}", model="keras.layers:GRU"):
    "A user's model type, registered by importing its module."
    units: int = setting(32, "GRU units")
'''


@pytest.fixture()
def user_module(tmp_path, monkeypatch, request):
    """An importable module (on sys.path, not imported yet) registering a model type."""
    name = f"user_components_{request.node.name.split('[')[0][-20:]}"
    (tmp_path / f"{name}.py").write_text(MODULE.replace("{name}", name), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    unregister_model_type(name)
    import sys

    sys.modules.pop(name, None)


def test_a_run_file_imports_the_modules_of_its_components(user_module, tmp_path):
    import json
    import sys

    from tf_outheads_zoo.stored import read_run_config, read_stored_run

    run_file = tmp_path / "mine.yaml"
    run_file.write_text(f"imports: [{user_module}]\npreset: lstm-tiny\n"
                        f"model: {{model_type: {user_module}, units: 4}}\n", encoding="utf-8")
    assert user_module not in sys.modules
    name, config = read_run_config(str(run_file))
    assert user_module in sys.modules and config.imports == (user_module,)
    preset = config.to_dict()
    assert preset["imports"] == [user_module] and preset["model"]["units"] == 4

    # run.json keeps the list: reading it imports the module (translate, export, resume).
    stored = tmp_path / "run.json"
    stored.write_text(json.dumps({"preset": name, **preset}), encoding="utf-8")
    unregister_model_type(user_module)
    sys.modules.pop(user_module)
    assert read_stored_run(str(stored))[1].model.model_type == user_module
    assert user_module in sys.modules


def test_an_import_that_fails_names_the_file_and_the_module(tmp_path):
    from tf_outheads_zoo.stored import read_run_config

    run_file = tmp_path / "mine.yaml"
    run_file.write_text("imports: [no_such_module_here]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"mine.yaml: imports: cannot import "
                                          "'no_such_module_here'.*PYTHONPATH"):
        read_run_config(str(run_file))
    run_file.write_text("imports: no_such_module_here\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="imports must be a list of module names"):
        read_run_config(str(run_file))


@pytest.mark.parametrize("overrides, message", [
    ({"model.head": {"class_name": "joint", "config": {"joint_dims": 16}}},
     "model.head.config: JointEmbeddingHead takes no argument 'joint_dims'; did you mean "
     "'joint_dim'?"),
    ({"train.loss": {"class_name": "vmf", "config": {"norm_penalti": 0.1}}},
     "train.loss.config: VMFLoss takes no argument 'norm_penalti'; did you mean 'norm_penalty'?"),
])
def test_check_components_refuses_an_argument_the_class_does_not_take(overrides, message):
    with pytest.raises(ConfigError) as error:
        check_components(RunConfig().with_overrides(overrides))
    assert str(error.value).startswith(message)
    # The arguments it does take pass.
    check_components(RunConfig().with_overrides(
        {"model.head": {"class_name": "joint", "config": {"joint_dim": 16, "name": "head"}}}))


def test_every_preset_names_registered_components_with_arguments_they_take():
    from tf_outheads_zoo.presets import PRESET_CONFIGS

    for name, config in PRESET_CONFIGS.items():
        assert check_components(config) is config, name

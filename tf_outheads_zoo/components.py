"""The pieces of a run built from its typed configuration (`tf_outheads_zoo.config.RunConfig`):
model, loss, optimizer, learning rate, target vectors.

Every name a configuration gives is looked up in a registry: model types in
`tf_outheads_zoo.model_config.MODEL_TYPES` (registered by their config sections), heads,
losses, optimizers and schedules in `tf_outheads.registry` (registered where each
class is defined). `check_components` looks them all up before a run writes
anything. A new model, head, loss, optimizer or schedule needs no change here.
"""

import difflib
import inspect
import json
import os
import time

import numpy as np

from tf_outheads import data as tfo_data
from tf_outheads.losses.bag_of_words import (DEFAULT_POSITIVE_WEIGHT,
                                             DEFAULT_SELECTION_WEIGHT, BagOfWordsLoss)
from tf_outheads.losses.rewe import PAPER_REWE_WEIGHT, ReWELoss
from tf_outheads.metrics.hubness import hubness
from tf_outheads.registry import HEADS, LEARNING_RATE_SCHEDULES, LOSSES, OPTIMIZERS
from tf_outheads_zoo.schema import TARGET_VECTOR_DEFAULTS, ConfigError


def check_components(config):
    """Look up every registered name `config` gives; `ConfigError` naming the setting,
    the registered names and the closest one for a name nobody registered."""
    head = config.model.head
    names = [(HEADS, head["class_name"] if isinstance(head, dict) else head),
             (OPTIMIZERS, config.train.optimizer)]
    if config.train.loss:
        names.append((LOSSES, config.train.loss["class_name"]))
    schedule = config.train.learning_rate_schedule
    if schedule:
        if "name" not in schedule:
            raise ConfigError("train.learning_rate_schedule must be None or {'name': a "
                              "registered schedule, ...options}. Received: "
                              f"train.learning_rate_schedule={schedule!r}")
        names.append((LEARNING_RATE_SCHEDULES, schedule["name"]))
    for registry, name in names:
        if name not in registry:
            raise ConfigError(registry.unknown(name))
    if config.data.subword_sampling and config.data.tokenizer_type != "unigram":
        raise ConfigError("data.subword_sampling samples unigram segmentations (Kudo 2018): "
                          "set data.tokenizer_type: unigram. Received: data.tokenizer_type="
                          f"{config.data.tokenizer_type!r}")
    if isinstance(head, dict):
        _check_arguments(HEADS[head["class_name"]], head.get("config") or {},
                         "model.head.config")
    if config.train.loss:
        _check_arguments(LOSSES[config.train.loss["class_name"]],
                         config.train.loss.get("config") or {}, "train.loss.config")
    return config


# What `keras.layers.Layer` and `keras.losses.Loss` take through a subclass's **kwargs.
_BASE_ARGUMENTS = ("name", "dtype", "trainable", "autocast", "reduction")


def _check_arguments(cls, options, setting):
    """`ConfigError` naming `setting` for a key of `options` that `cls` does not take."""
    parameters = inspect.signature(cls.__init__).parameters
    accepted = [name for name, p in parameters.items() if name != "self"
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)] + list(_BASE_ARGUMENTS)
    for key in options:
        if key not in accepted:
            close = difflib.get_close_matches(key, accepted, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else "."
            raise ConfigError(f"{setting}: {cls.__name__} takes no argument {key!r}{hint} It "
                              f"takes {', '.join(a for a in accepted if a not in _BASE_ARGUMENTS)}"
                              f". Received: {setting}.{key}={options[key]!r}")


def model_arguments(config):
    """`(model class, keyword arguments)` of a configuration's model section: its
    `model_type` picks the class (`ModelConfig.model_class`), the other keys are the
    class's arguments."""
    model = config.model
    return model.model_class(), model.arguments()


def build_model(config, source_vocabulary_size, target_vocabulary_size):
    """The model of `config` (a `RunConfig`: `preset_config(name)`, a run's settings)."""
    model_cls, arguments = model_arguments(config)
    return model_cls(source_vocabulary_size, target_vocabulary_size, **arguments)


def learning_rate(config):
    """The learning rate: `train.learning_rate`, or its schedule.

    `train.learning_rate_schedule` (optional): `None`, or a registered schedule
    and its options, `{"name": "inverse_sqrt", "warmup_steps": 4000, "scale": 1.0}`
    (`tf_outheads.training.InverseSquareRootSchedule`; its `model_dim` defaults to
    the model's width, `ModelConfig.width`). A schedule replaces `train.learning_rate`.
    """
    schedule = config.train.learning_rate_schedule
    if not schedule:
        if config.train.learning_rate is None:
            raise ConfigError("train.learning_rate must be a float when there is no "
                              "train.learning_rate_schedule. Received: learning_rate=None")
        return config.train.learning_rate
    options = {key: value for key, value in schedule.items() if key != "name"}
    if config.model.width is not None:
        options.setdefault("model_dim", config.model.width)
    return LEARNING_RATE_SCHEDULES.lookup(schedule.get("name"))(**options)


def build_optimizer(config):
    """The optimizer `train.optimizer` names (a registered one; default Keras' Adam).

    `train` keys: `learning_rate` or `learning_rate_schedule` (see
    `learning_rate`), `adam_beta_2` (`None`: Keras' 0.999; the Transformer's
    0.98), `adam_epsilon` (`None`: Keras' 1e-7; OpenNMT-py and PyTorch 1e-8,
    Vaswani et al. 1e-9), `clipnorm` (each gradient clipped to this norm on
    its own, Keras' `clipnorm`) and `global_clipnorm` (all gradients scaled
    together so that their joint norm is at most this: OpenNMT-py's
    `max_grad_norm`, fairseq's `--clip-norm`). At most one of the two
    clipping keys may be set (`RunConfig.check_across`).
    """
    train = config.train
    # Adam's own keys only when set (None: Keras' defaults), so that any registered
    # Keras optimizer can be named.
    adam = {key: value for key, value in (("beta_2", train.adam_beta_2),
                                          ("epsilon", train.adam_epsilon)) if value is not None}
    return OPTIMIZERS.lookup(train.optimizer)(
        learning_rate=learning_rate(config), clipnorm=train.clipnorm,
        global_clipnorm=train.global_clipnorm, **adam)


def training_loss(train_config):
    """`compile_for_translation` keywords for the losses of `train_config` (a
    `TrainConfig`, `RunConfig.train`).

    The output layer's loss (`_output_loss`) and, with `train.rewe`
    (`{"weight": λ, "distance": "cosine" | "mse"}`, Eq. 7 of ReWE), the ReWE
    loss of a model built with `model.rewe`; with `train.selection` (`{"weight",
    "positive_weight"}`) the bag-of-words loss of one built with `model.selection`
    (a model with either head and no such key trains it with its defaults).
    """
    keywords = _output_loss(train_config)
    losses, weights = {}, {}
    rewe = train_config.rewe
    if rewe:
        losses["rewe"] = ReWELoss(rewe.get("distance", "cosine"))
        weights["rewe"] = rewe.get("weight", PAPER_REWE_WEIGHT)
    selection = train_config.selection
    if selection:
        losses["selection"] = BagOfWordsLoss(
            selection.get("positive_weight", DEFAULT_POSITIVE_WEIGHT))
        weights["selection"] = selection.get("weight", DEFAULT_SELECTION_WEIGHT)
    if losses:
        keywords.update(auxiliary_losses=losses, auxiliary_weights=weights)
    return keywords


def _output_loss(train):
    """`compile_for_translation` keywords for the output layer's loss: `train.loss` by
    name, the sampled softmax, or (none given) the head's own `default_loss` with
    `train.label_smoothing`."""
    if train.loss:
        return {"loss": LOSSES.lookup(train.loss["class_name"])(**train.loss.get("config", {}))}
    if not train.sampled_softmax:
        return {"label_smoothing": train.label_smoothing}
    return {"loss": LOSSES.lookup("sampled_softmax")(
        label_smoothing=train.label_smoothing, seed=train.seed, **train.sampled_softmax)}


def prepare_target_vectors(data_config, train, target_tokenizer, run_dir, seed, log=print):
    """The target table of a continuous head or ReWE: load `path`, or train vectors once.

    Trained vectors are cached in `run_dir/target_vectors.vec` and reused. The table's
    post-processing and special vectors follow `data.target_vectors` (`center`,
    `remove_components`, `eos`; `tf_outheads.data.target_embedding_table`); its hubness
    (`tf_outheads.metrics.hubness`, k = 10, the rows with a vector as their own queries)
    is logged and written with the counts to `run_dir/target_table.json` (estimated
    from `HUBNESS_QUERIES` query rows for a larger table).
    """
    options = {**TARGET_VECTOR_DEFAULTS, **(data_config.target_vectors or {})}
    path = options["path"]
    if not path:
        path = os.path.join(run_dir, "target_vectors.vec")
        if not os.path.exists(path):
            start = time.time()
            tfo_data.train_word_vectors(
                train.targets, target_tokenizer, path, dim=options["dim"],
                epochs=options["epochs"], seed=seed, model=options["model"],
                eos_token=(target_tokenizer.id_to_piece(tfo_data.EOS_ID)
                           if options["eos"] == "file" else None))
            log(f"[vectors] trained {options['model']} on {len(train)} target sentences "
                f"in {time.time() - start:.0f} s → {path}")
    words, vectors = tfo_data.load_word_vectors(path)
    table = tfo_data.target_embedding_table(
        target_tokenizer, words, vectors, seed=seed, center=options["center"],
        remove_components=options["remove_components"], eos=options["eos"])
    log(f"[vectors] {path}: {table.counts}; rows {table.postprocessing}; "
        f"</s>: {table.special[target_tokenizer.id_to_piece(tfo_data.EOS_ID)]}")
    summary = table_hubness(table, target_tokenizer)
    log(f"[vectors] hubness (k = {summary['k']}): skewness {summary['skewness']:.2f}, "
        f"{summary['anti_hub_fraction']:.1%} never a neighbour; top hubs "
        + ", ".join(f"{piece} {count}" for piece, count in summary["top"][:5]))
    record = {"path": path, "options": options, "counts": table.counts,
              "postprocessing": table.postprocessing, "special": table.special,
              "hubness": summary}
    with open(os.path.join(run_dir, "target_table.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, ensure_ascii=False)
    return table


# Queries of a run's table-hubness estimate: the search costs queries × rows, about
# 1 min at 50K × 50K on 2 cores, 6 s with this sample (every row of a smaller table).
HUBNESS_QUERIES = 5000


def table_hubness(table, target_tokenizer, k=10, queries=HUBNESS_QUERIES, seed=0):
    """`Hubness.as_dict` of a `TargetTable`'s rows that have their own vector (each
    query row leaving itself out; at most `queries` seeded rows of a larger table, an
    estimate), top hubs named by their pieces."""
    rows = np.flatnonzero(table.has_vector)
    query_rows = None
    if len(rows) > queries:
        query_rows = np.sort(np.random.default_rng(seed).choice(len(rows), queries,
                                                                replace=False))
    result = hubness(table.vectors[rows], k=min(k, len(rows) - 1), query_rows=query_rows)
    return result.as_dict(names=lambda index: target_tokenizer.id_to_piece(int(rows[index])))

"""The run configuration: one typed schema for presets, `--set`, run files and `run.json`.

A run is configured by four sections, each a frozen dataclass whose fields are
its keys (type, default, one-line doc): `DataConfig` (corpus, cleaning,
tokenizer, batching), a model section (the section of the registered model
type `model.model_type` names, `LSTMConfig`, `TransformerConfig` or a user's: see
`tf_outheads_zoo.model_config`), `TrainConfig` (optimizer, loss, schedule, budgets,
distribution) and `DecodeConfig`. `RunConfig` holds the four and a
description. Everything that reads settings goes through the same checks:

- presets (`tf_outheads_zoo.presets`): a parent (or the defaults) and the keys it changes,
  `RunConfig.updated`;
- `--set section.key=value` and other dotted overrides, `RunConfig.with_overrides`;
- a user's run file (YAML or JSON, an optional `preset:` base),
  `tf_outheads_zoo.stored.load_run_config`;
- a run directory's stored `run.json` (`preset.json` in older ones),
  `tf_outheads_zoo.stored.read_stored_run` (`RunConfig.from_dict(stored=True)`): a key
  the file lacks gets the value the code used before the key existed (`legacy`).

The fields' building blocks (`setting`, `ConfigError`, coercion and value checks) are
in `tf_outheads_zoo.schema`; reading run files and stored presets, in
`tf_outheads_zoo.stored` (which reads the preset table: `tf_outheads_zoo.presets`
depends on this module, this module on neither).

An unknown key is refused with the section's valid keys and the closest one;
a key of the other model type says which type it belongs to; values are
checked (and numbers coerced) against the field's type and choices.

The zoo passes the `RunConfig` from the CLI to the builders (`tf_outheads_zoo.train`,
`tf_outheads_zoo.components`); `RunConfig.to_dict()` is its plain nested dict, what a run
directory stores (`run.json`) and what is printed or compared as JSON.
"""

import copy
import dataclasses
import difflib
import importlib
import os

from tf_outheads_zoo.model_config import MODEL_TYPES, LSTMConfig, ModelConfig
from tf_outheads_zoo.schema import (
    SAME_AS_DEFAULT,
    TARGET_VECTOR_KEYS,
    ConfigError,
    above,
    at_least,
    check_at_least_one,
    check_positive,
    check_probability,
    check_sampled_softmax,
    check_eos_bias_setting,
    check_share,
    check_subword_sampling,
    check_target_vectors,
    check_value,
    setting,
)

SECTIONS = ("data", "model", "train", "decode")
EMBEDDED_CORPUS = os.path.join(os.path.dirname(__file__), "data", "bible-es-en.tsv.gz")

# The SWORD export of the WEB appends the last heading it saw to later verses:
# Psalm 145's superscription to 3,616 verses from Psalm 145:21 to Malachi, the
# Psalm 151 note to 7,201 New Testament verses (dev and test included). They
# are not part of the verses; keeping them inflates BLEU (the model learns to
# emit them). Counted and stripped from the target column of every split.
BIBLE_WEB_ARTIFACTS = (
    "A praise psalm by David.",
    "This Psalm is a genuine one of David, though extra, composed when he fought "
    "in single combat with Goliath.",
)

# Keys of a data.dev / data.test mapping: text files, or a TSV split.
SET_KEYS = ("source", "target", "references", "tsv", "split")

# -- the schema -------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Corpus, cleaning, tokenizer and batching (`tf_outheads_zoo.splits`, `tf_outheads_zoo.train`)."""

    corpus: str = setting(EMBEDDED_CORPUS, "TSV corpus with train/dev/test splits "
                          "(default: the embedded Bible corpus); the sets data.train/dev/test "
                          "do not name elsewhere come from it")
    train: dict | list[dict] | None = setting(
        None, "training set: None (the corpus's train split), {source, target} text files "
        "(.gz read as gzip; streamed, never held in memory), a list of such pairs, or "
        "{tsv, split, source, target}",
        check=lambda value, dotted: check_data_set(value, dotted))
    dev: dict | None = setting(
        None, "dev set: None (the corpus's dev split), {source, target, references: [...]} "
        "text files, or {tsv, split, source, target, references}",
        keys=SET_KEYS, check=lambda value, dotted: check_data_set(value, dotted))
    test: dict | None = setting(
        None, "test set, as data.dev", keys=SET_KEYS,
        check=lambda value, dotted: check_data_set(value, dotted))
    source_column: str = setting("es", "column of the source sentences")
    target_column: str = setting("en_web", "column of the target sentences (the primary "
                                 "reference)")
    reference_columns: list[str] = setting(["en_kjv"], "further reference columns scored "
                                           "at evaluation")
    strip_target_suffixes: list[str] = setting(
        list(BIBLE_WEB_ARTIFACTS), "known boilerplate stripped from the end of target "
        "sentences (every split), counted; pairs still containing it are dropped from train",
        legacy=[])  # runs stored without the key stripped nothing
    max_length: int | None = setting(100, "cleaning: drop training pairs with more "
                                     "whitespace tokens than this on either side",
                                     check=at_least(1))
    max_length_ratio: float | None = setting(2.5, "cleaning: drop training pairs whose "
                                             "token counts differ by more than this ratio",
                                             check=at_least(1))
    vocab_size: int = setting(8000, "SentencePiece vocabulary size (per side when not joint)",
                          check=at_least(8))
    joint_vocabulary: bool = setting(True, "one SentencePiece model for both languages")
    tokenizer_type: str = setting("bpe", "SentencePiece model type",
                                  choices=("bpe", "unigram"))
    tokenizer_seed: int | None = setting(None, "SentencePiece's seed; None: train.seed")
    subword_sampling: dict | None = setting(
        None, "subword regularisation of training batches (Kudo 2018; unigram models): "
        "{nbest_size (>= 2), alpha}, e.g. {nbest_size: 64, alpha: 0.1}; None: the best "
        "segmentation", keys=("nbest_size", "alpha"), check=check_subword_sampling)
    tokenizer_sample: int | None = setting(
        500_000, "SentencePiece trains on a seeded sample of this many cleaned training "
        "pairs (all of them when fewer); None: every pair", legacy=None,
        check=at_least(1))
    batch_tokens: int = setting(4096, "padded tokens per batch, source and target each "
                                "(the global batch under a distribution strategy)",
                                check=at_least(1))
    # Length buckets 1 token wide, carried over passes: batches as full as
    # OpenNMT-py's sorted-pool ones (tf_outheads.data.pipeline; issue 17).
    bucket_width: int = setting(1, "width in tokens of the length buckets of the training "
                                "batches", legacy=8, check=at_least(1))  # runs stored without it used 8
    shuffle_buffer: int | None = setting(
        100_000, "training examples in the shuffle buffer (bounds memory and backup size; "
        "as large as the data: a uniform shuffle); None: the whole in-memory corpus",
        legacy=None, check=at_least(1))
    shuffle_indices: bool = setting(
        True, "an in-memory corpus is shuffled by index: backups hold 8 bytes per buffered "
        "pair, not its text (the same batches)", legacy=False)  # older backups' structure
    max_sequence_length: int | None = setting(160, "subword tokens incl. EOS/BOS; longer "
                                              "training pairs are dropped",
                                              check=at_least(2))
    target_vectors: dict | None = setting(
        None, "target word vectors of a continuous head or ReWE: None, or {dim, epochs, "
        "path (a .vec/.bin file; without one, vectors are trained on the target side), "
        "model (fasttext | word2vec: no character n-grams), center (subtract the mean), "
        "remove_components (top principal components removed after centring), "
        "eos (far | file: the vectors' own </s> | negative_period)}",
        keys=TARGET_VECTOR_KEYS, check=lambda value, dotted: check_target_vectors(value, dotted))



@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Optimizer, loss, budgets, evaluation, backups and distribution (`tf_outheads_zoo.train`)."""

    learning_rate: float | None = setting(1e-3, "Adam's learning rate; None: given by "
                                          "learning_rate_schedule", check=at_least(0))
    learning_rate_schedule: dict | None = setting(
        None, "None, or a registered schedule and its options, {name: inverse_sqrt, "
        "warmup_steps, scale} (replaces learning_rate)")
    optimizer: str = setting("adam", "a registered optimizer (`tf-outheads components` "
                             "lists them)")
    adam_beta_2: float | None = setting(None, "Adam's beta_2; None: Keras' 0.999",
                                      check=check_probability)
    adam_epsilon: float | None = setting(None, "Adam's epsilon; None: Keras' 1e-7",
                                       check=above(0))
    clipnorm: float | None = setting(None, "clip each gradient to this norm on its own",
                                      check=above(0))
    global_clipnorm: float | None = setting(None, "scale all gradients to this joint norm "
                                            "(at most one of the two clipping keys)",
                                            check=above(0))
    label_smoothing: float = setting(0.0, "label smoothing of the cross-entropy",
                                    check=check_probability)
    sampled_softmax: dict | None = setting(
        None, "SampledSoftmaxLoss options ({fraction, mode, num_sampled}), or None: full softmax",
        keys=("fraction", "mode", "num_sampled"), check=check_sampled_softmax)
    loss: dict | None = setting(
        None, "a registered loss ({class_name, config}; `tf-outheads components` lists "
        "them); None: the head's own (categorical heads: cross-entropy, or the sampled "
        "softmax; the continuous head: vMF)",
        keys=("class_name", "config"))
    rewe: dict | None = setting(None, "ReWE loss {weight, distance: cosine or mse} of a "
                                "model with model.rewe, or None", keys=("weight", "distance"))
    selection: dict | None = setting(
        None, "neural vocabulary selection loss {weight, positive_weight} of a model with "
        "model.selection (BagOfWordsLoss; Sockeye's 1 and 10 by default), or None",
        keys=("weight", "positive_weight"))
    steps_per_epoch: int = setting(2000, "optimizer steps between dev evaluations",
                                   check=check_at_least_one)
    epochs: int = setting(30, "epochs (evaluations) at most: a budget of epochs × "
                          "steps_per_epoch steps", check=check_at_least_one)
    max_steps: int | None = setting(None, "optimizer step budget (>= 1); None: none",
                                    check=check_at_least_one)
    max_minutes: float | None = setting(None, "wall-clock training budget; None: none",
                                       check=above(0))
    patience: int | None = setting(5, "early stopping after this many evaluations without "
                                   "a better dev BLEU; None: never",
                                   check=at_least(0))
    seed: int = setting(1234, "seed of weights, data order and sampling")
    init_from: str | None = setting(
        None, "a trained run directory to start from: its weights, pieces, word pairs and "
        "target table (tf_outheads_zoo/init_from.py); None: random initialisation")
    init_optimizer: bool = setting(False, "with init_from: the parent's optimizer moments "
                                   "and step count too (the schedule goes on)")
    update_vocab: str | None = setting(
        None, "with init_from: merge (the parent's pieces + the new data's) or replace (the "
        "new data's) the pieces, every table moved by piece; None: the parent's pieces",
        choices=("merge", "replace"))
    # tf_outheads.training.fit: distribution, precision, accumulation, backups.
    strategy: str = setting("default", "tf.distribute strategy: one device, the local "
                            "GPUs, or the workers of TF_CONFIG",
                            choices=("default", "mirrored", "multi_worker"))
    num_gpus: int | None = setting(None, "mirrored: use the first N GPUs; None: all",
                                   check=at_least(1))
    precision: str = setting("float32", "dtype policy (mixed_float16 adds loss scaling)",
                             choices=("float32", "mixed_float16", "mixed_bfloat16"))
    accumulation_steps: int = setting(1, "global batches per optimizer update",
                                    check=at_least(1))
    jit_compile: bool = setting(False, "XLA-compile each replica's training step (on 2 CPU "
                                "cores no faster than the graph step: benchmarks/docs/training.md)")
    steps_per_execution: int = setting(1, "optimizer steps per host round trip; logs, backups, "
                                       "dev evaluations and NaN checks stay at their steps")
    backup_every_n_steps: int = setting(200, "steps between backups (weights, optimizer, "
                                        "data position; also at each epoch's end) in "
                                        "RUN_DIR/backup", check=at_least(1))
    keep_backups: int = setting(3, "backups kept (the best model's is kept too)",
                                check=at_least(1))
    nonfinite: str = setting("raise", "what a non-finite loss (or one above max_loss) does",
                             choices=("raise", "skip"))
    max_skipped_share: float = setting(
        0.05, "nonfinite=skip: the run fails once more than 10 steps and this share of "
        "its steps were skipped", check=check_share)
    max_loss: float | None = setting(1e6, "a step loss above it has diverged: treated as "
                                     "non-finite (None: no limit)", check=check_positive)
    average_last: int | None = setting(None, "final model: the mean of the last N backups' "
                                       "weights (N <= keep_backups); None: the best "
                                       "dev-BLEU weights", check=at_least(1))


@dataclasses.dataclass(frozen=True)
class DecodeConfig:
    """Decoding of dev/test and `tf-outheads translate` (`Translator`); defaults are its own."""

    batch_size: int = setting(64, "sentences per decoding batch",
                              check=at_least(1))
    max_length_ratio: float = setting(1.5, "output limit: ratio × source length + offset",
                                      check=above(0))
    max_length_offset: int = setting(10, "output limit: ratio × source length + offset",
                                     check=at_least(0))
    beam_size: int = setting(1, "beam width; 1: greedy search",
                             check=at_least(1))
    length_penalty: float = setting(0.0, "GNMT length penalty alpha",
                                    check=at_least(0))
    replace_unk: bool = setting(False, "copy the most-attended source word over each "
                                "unknown-word token")

    eos_bias: float = setting(0.0, "added to EOS's score at every decoding step, in the "
                              "head's score unit (nats; a cosine for cosine scoring); "
                              "< 0: longer outputs", check=check_eos_bias_setting)
    block_repeats: bool = setting(False, "decoding never outputs a piece right after itself")

    def options(self):
        """The section as keyword arguments (`Translator(**options)`, `export_options`)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


SECTION_CONFIGS = {"data": DataConfig, "train": TrainConfig, "decode": DecodeConfig}


def section_fields(section, model_type="lstm"):
    """`{key: dataclasses.Field}` of a section (the model section of `model_type`)."""
    cls = MODEL_TYPES[model_type] if section == "model" else SECTION_CONFIGS[section]
    return {field.name: field for field in dataclasses.fields(cls)}


def _unknown_key(section, key, value, source, model_type):
    """The `ConfigError` of `section.key`, which the section (of `model_type`) lacks."""
    valid = section_fields(section, model_type)
    candidates = list(valid)
    which = ""
    if section == "model":
        which = f" (model_type {model_type!r})"
        owners = [other for other in MODEL_TYPES
                  if other != model_type and key in section_fields("model", other)]
        if owners:
            raise ConfigError(
                f"{source}: model.{key} applies to model_type {owners[0]!r} only, and this "
                f"configuration's model_type is {model_type!r}. Valid model keys{which}: "
                f"{', '.join(sorted(valid))}. Received: model.{key}={value!r}")
        candidates += [k for other in MODEL_TYPES for k in section_fields("model", other)]
    close = difflib.get_close_matches(key, candidates, n=1)
    hint = f"; did you mean {section}.{close[0]}?" if close else "."
    raise ConfigError(f"{source}: unknown setting {section}.{key}{hint} Valid {section} "
                      f"keys{which}: {', '.join(sorted(valid))}. "
                      f"Received: {section}.{key}={value!r}")


def _unknown_section(section, source, received):
    close = difflib.get_close_matches(section, SECTIONS, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "."
    return ConfigError(f"{source}: unknown section {section!r}{hint} Settings are "
                       f"SECTION.KEY with SECTION one of {', '.join(SECTIONS)}. "
                       f"Received: {received}")


def _migrate(changes, source):
    """Old spellings → today's, in a `{section: {key: value}}` dict (copied):
    `train.model_type` (before the schema) → `model.model_type`."""
    changes = {section: dict(values) for section, values in changes.items()}
    train = changes.get("train") or {}
    if "model_type" in train:
        old = train.pop("model_type")
        model = changes.setdefault("model", {})
        if "model_type" in model and model["model_type"] != old:
            raise ConfigError(f"{source}: train.model_type (the old spelling of "
                              f"model.model_type) says {old!r}, model.model_type "
                              f"{model['model_type']!r}. Received: train.model_type={old!r}")
        model.setdefault("model_type", old)
    return changes


# -- the configuration ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class RunConfig:
    """A whole run's settings: `data`, `model`, `train`, `decode` and a description.

    `RunConfig()` is the schema's defaults. Derive others with `updated`
    (section dicts) or `with_overrides` (dotted keys); both check every key
    and value and return a new config.
    """

    data: DataConfig = dataclasses.field(default_factory=DataConfig)
    model: ModelConfig = dataclasses.field(default_factory=LSTMConfig)
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)
    decode: DecodeConfig = dataclasses.field(default_factory=DecodeConfig)
    description: str = ""
    # Modules that register the run's own components (`import_components`).
    imports: tuple = ()

    def updated(self, changes, source="configuration", description=None):
        """A copy with `changes` (`{section: {key: value}}`) applied, checked.

        Changing `model.model_type` starts the model section from the new type's
        defaults, keeping the keys every type has (`head`, `rewe`,
        `shared_private`); the other model keys of `changes` apply after it.

        Raises:
            ConfigError: naming `source`, the key and the valid keys of its section.
        """
        for section, values in changes.items():
            if section not in SECTIONS:
                raise _unknown_section(section, source, f"{section}={values!r}")
            if not isinstance(values, dict):
                raise ConfigError(f"{source}: section {section!r} must be a mapping of keys "
                                  f"to values. Received: {section}={values!r}")
        changes = _migrate(changes, source)
        sections = {section: getattr(self, section) for section in SECTIONS}
        model_changes = dict(changes.get("model", {}))
        if "model_type" in model_changes:
            field = section_fields("model")["model_type"]
            model_type = check_value(field, model_changes.pop("model_type"),
                                      "model.model_type", source)
            if model_type != self.model.model_type:
                common = {f.name: getattr(self.model, f.name)
                          for f in dataclasses.fields(ModelConfig) if f.name != "model_type"}
                sections["model"] = MODEL_TYPES[model_type](model_type=model_type, **common)
        if model_changes:
            changes = dict(changes, model=model_changes)
        else:
            changes.pop("model", None)
        for section, values in changes.items():
            current = sections[section]
            fields = section_fields(section, getattr(sections["model"], "model_type"))
            checked = {}
            for key, value in values.items():
                if key not in fields:
                    _unknown_key(section, key, value, source, sections["model"].model_type)
                checked[key] = check_value(fields[key], value, f"{section}.{key}", source)
            sections[section] = dataclasses.replace(current, **checked)
        config = RunConfig(**sections, imports=self.imports,
                           description=self.description if description is None else description)
        try:
            config.check_across()
        except ConfigError as error:
            raise ConfigError(f"{source}: {error}") from None
        return config

    def check_across(self):
        """Checks between keys (each key's own are in its field): the model section's
        (`ModelConfig.check_across`), one clipping key, averaging no more backups than
        are kept."""
        self.model.check_across()
        train = self.train
        if train.clipnorm is not None and train.global_clipnorm is not None:
            raise ConfigError("set at most one of train.clipnorm (per variable) and "
                              "train.global_clipnorm (all gradients jointly). Received: "
                              f"train.clipnorm={train.clipnorm!r}, "
                              f"train.global_clipnorm={train.global_clipnorm!r}")
        sampled = train.sampled_softmax or {}
        if sampled.get("mode", "batch") != "batch" and train.label_smoothing:
            raise ConfigError("label smoothing spreads mass over the batch's candidates: "
                              "train.label_smoothing needs train.sampled_softmax.mode 'batch'. "
                              f"Received: train.label_smoothing={train.label_smoothing!r}, "
                              f"train.sampled_softmax={train.sampled_softmax!r}")
        if train.average_last is not None and train.average_last > train.keep_backups:
            raise ConfigError("train.average_last averages backups that are kept: it must be "
                              "<= train.keep_backups. Received: train.average_last="
                              f"{train.average_last}, train.keep_backups={train.keep_backups}")

    def with_overrides(self, overrides, source="configuration"):
        """A copy with dotted overrides applied (`{"train.max_minutes": 5}`), checked
        as `updated` checks them (`train.model_type` is read as `model.model_type`)."""
        changes = {}
        for dotted, value in (overrides or {}).items():
            section, _, key = str(dotted).partition(".")
            if section not in SECTIONS or not key:
                raise _unknown_section(section, source, f"{dotted}={value!r}")
            changes.setdefault(section, {})[key] = value
        return self.updated(changes, source)

    @classmethod
    def from_dict(cls, values, source="configuration", stored=False):
        """The config of a plain `{description?, imports?, data, model, train, decode}`
        dict (`to_dict`'s layout). Its `imports` are imported first. Keys it lacks get the defaults, or with
        `stored=True` (a run directory's `run.json`) their `legacy` values."""
        if not isinstance(values, dict):
            raise ConfigError(f"{source}: expected a mapping with the sections "
                              f"{', '.join(SECTIONS)}. Received: {type(values).__name__}")
        base = cls().with_imports(values.get("imports") or [], source)  # before any check
        extra = sorted(set(values) - set(SECTIONS) - {"description", "imports"})
        if extra:
            raise _unknown_section(extra[0], source, f"{extra[0]}={values[extra[0]]!r}")
        changes = {section: values[section] for section in SECTIONS if section in values}
        for section, value in changes.items():
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: section {section!r} must be a mapping of keys "
                                  f"to values. Received: {section}={value!r}")
        changes = _migrate(changes, source)
        if stored and changes.get("train", {}).get("max_steps") == 0:
            # Before max_steps was checked, 0 meant no budget (the value is refused now).
            changes["train"]["max_steps"] = None
        if stored:  # keys the file lacks: what the code did before they existed
            model_type = changes.get("model", {}).get("model_type", "lstm")
            for section in SECTIONS:
                fields = section_fields(section, model_type if model_type in MODEL_TYPES
                                        else "lstm")
                for key, field in fields.items():
                    if (field.metadata["legacy"] is not SAME_AS_DEFAULT
                            and key not in changes.get(section, {})):
                        changes.setdefault(section, {})[key] = field.metadata["legacy"]
        description = values.get("description", "")
        if not isinstance(description, str):
            raise ConfigError(f"{source}: description must be str. "
                              f"Received: description={description!r}")
        return base.updated(changes, source, description=description)

    def with_imports(self, modules, source="configuration"):
        """A copy that also imports `modules` (`import_components`; imported here, so
        that the model types and names they register are known to the checks)."""
        modules = import_components(modules, source)
        return dataclasses.replace(
            self, imports=self.imports + tuple(m for m in modules if m not in self.imports))

    def to_dict(self):
        """The plain nested dict (stored, printed): `{description, data, model, train, decode}`,
        and `imports` when there are any.

        `model` holds `model_type` and the model class's keyword arguments (its
        own keys first, then `head`, `rewe`, `shared_private`): `model_arguments`
        (`tf_outheads_zoo.components.model_arguments`) splits the two.
        """
        def values(config, names):
            return {name: copy.deepcopy(getattr(config, name)) for name in names}

        common = [f.name for f in dataclasses.fields(ModelConfig) if f.name != "model_type"]
        own = [f.name for f in dataclasses.fields(self.model)
               if f.name not in common and f.name != "model_type"]
        return {
            "description": self.description,
            **({"imports": list(self.imports)} if self.imports else {}),
            "data": values(self.data, [f.name for f in dataclasses.fields(self.data)]),
            "model": values(self.model, ["model_type"] + own + common),
            "train": values(self.train, [f.name for f in dataclasses.fields(self.train)]),
            "decode": values(self.decode, [f.name for f in dataclasses.fields(self.decode)]),
        }


def import_components(modules, source="configuration"):
    """Import `modules` (names of importable modules: installed, or on `PYTHONPATH`), which
    register a run's own model types, heads, losses, optimizers or schedules; returns
    them as a tuple. A run file's `imports:` and a stored `run.json`'s go through here,
    so `train`, `translate`, `export` and the studies know the same names.

    Raises:
        ConfigError: naming `source`, for a value that is not a list of module names or
            a module that cannot be found.
    """
    if isinstance(modules, str) or not all(isinstance(m, str) and m for m in modules):
        raise ConfigError(f"{source}: imports must be a list of module names. "
                          f"Received: imports={modules!r}")
    for module in modules:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            raise ConfigError(
                f"{source}: imports: cannot import {module!r} ({error}); the module that "
                "registers your components must be importable (installed, or its directory "
                f"on PYTHONPATH). Received: imports={list(modules)!r}") from None
    return tuple(modules)


# -- data sets ----------------------------------------------------------------------------------

def data_set(data_config, split):
    """Where the `split` set ("train", "dev" or "test") of a `DataConfig` comes from.

    Returns one of:

    - `{"kind": "tsv", "path", "split", "source", "target", "references"}`: a
      TSV split (`data.<split>` None: `data.corpus`, split `split`, the
      `*_column` keys; a `{tsv, ...}` mapping: its keys, the rest as for None);
    - `{"kind": "files", "pairs": [(source, target), ...], "references": [...]}`:
      line-aligned text files (`references` only for dev and test).

    Raises:
        ConfigError: naming `data.<split>`, for a mapping that is neither form.
    """
    value = getattr(data_config, split)
    tsv = {"kind": "tsv", "path": data_config.corpus, "split": split,
           "source": data_config.source_column, "target": data_config.target_column,
           "references": list(data_config.reference_columns)}
    if value is None:
        return tsv
    entries = check_data_set(value, f"data.{split}")
    if "tsv" in entries[0]:
        entry = entries[0]
        tsv.update({key: entry[key] for key in ("split", "source", "target", "references")
                    if key in entry})
        tsv["path"] = entry["tsv"]
        return tsv
    return {"kind": "files", "pairs": [(e["source"], e["target"]) for e in entries],
            "references": list(entries[0].get("references") or [])}


def check_data_set(value, dotted):
    """The entries (mappings) of a `data.train` / `dev` / `test` value, checked: one
    `{tsv, split, source, target, references}` mapping, or text-file mappings
    `{source, target[, references]}` (a list of them for `data.train` only).

    Raises:
        ConfigError: naming `dotted`, for a value of neither form. The schema runs it
            when the key is set (a preset, `--set`, a run file), before anything is written.
    """
    split = dotted.rsplit(".", 1)[-1]
    entries = value if isinstance(value, list) else [value]
    if split != "train" and isinstance(value, list):
        raise ConfigError(f"{dotted} is one mapping (a list of file pairs is for data.train "
                          f"only). Received: {dotted}={value!r}")
    if not entries or not all(isinstance(entry, dict) for entry in entries):
        raise ConfigError(f"{dotted} must be a mapping {{source, target}} or {{tsv, ...}}"
                          f"{' or a list of {source, target} mappings' if split == 'train' else ''}"
                          f". Received: {dotted}={value!r}")
    allowed = set(SET_KEYS) if split != "train" else {"source", "target", "tsv", "split"}
    for entry in entries:
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise ConfigError(f"{dotted} takes the keys {', '.join(sorted(allowed))}; "
                              f"{', '.join(unknown)} is not one of them. "
                              f"Received: {dotted}={value!r}")
    if any("tsv" in entry for entry in entries):
        if len(entries) != 1:
            raise ConfigError(f"{dotted}: a TSV set is one mapping {{tsv, split, source, "
                              f"target}}. Received: {dotted}={value!r}")
        entry = entries[0]
        for key in ("tsv", "split", "source", "target"):
            if key in entry and not isinstance(entry[key], str):
                raise ConfigError(f"{dotted}.{key} must be str. Received: {entry[key]!r}")
        return entries
    for entry in entries:
        if not isinstance(entry.get("source"), str) or not isinstance(entry.get("target"), str):
            raise ConfigError(f"{dotted} needs the paths 'source' and 'target' of a text-file "
                              f"pair, or 'tsv'. Received: {dotted}={value!r}")
    references = entries[0].get("references") or []
    if isinstance(references, str) or not all(isinstance(r, str) for r in references):
        raise ConfigError(f"{dotted}.references must be a list of paths. "
                          f"Received: {references!r}")
    return entries

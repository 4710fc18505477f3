"""The main job: train a run's settings on a corpus, report dev/test BLEU, write translations.

`run_training` is the orchestration, in named steps (`_prepare_data`, `_build_model`,
`_fit`, `_final_weights`, `_evaluate`); the pieces live in their own modules:
`tf_outheads_zoo.runs` (run directory, lock, resume checks, saving and loading the
model), `tf_outheads_zoo.splits` (the corpus splits, `TrainingData`),
`tf_outheads_zoo.components` (model, loss, optimizer, schedule, target vectors from the
`RunConfig`) and `tf_outheads_zoo.curves` (`LossCurves`).
"""

import dataclasses
import functools
import json
import os
import time

import keras
import tensorflow as tf

from tf_outheads import data as tfo_data
from tf_outheads.decoding.translator import Translator
from tf_outheads.losses.rewe import PAPER_REWE_WEIGHT
from tf_outheads.metrics import evaluate_translations, format_report, parameter_report
from tf_outheads.training import backup as tfo_backup
from tf_outheads.training import strategy as tfo_strategy
from tf_outheads.training.callbacks import TimeLimit, stopped_by
from tf_outheads.training.translation import compile_for_translation, translation_callbacks
from tf_outheads.training.trainer import fit as train_model
from tf_outheads_zoo import init_from
from tf_outheads_zoo.components import (
    build_model,
    build_optimizer,
    check_components,
    prepare_target_vectors,
    training_loss,
)
from tf_outheads_zoo.curves import LossCurves
from tf_outheads_zoo.presets import DEFAULT_PRESET
from tf_outheads_zoo.runs import (
    DATA_FILES,
    RunDirectoryError,
    check_data_files,
    check_data_fingerprints,
    finished_run,
    resolve_run_config,
    run_directory_lock,
    save_model,
    write_json,
)
from tf_outheads_zoo.schema import ConfigError
from tf_outheads_zoo.run_pairs import FIGURE_FILE, PAIRS_FILE, resolve_pairs, write_pair_figure
from tf_outheads_zoo.splits import TrainingData, read_split, tokenizer_seed
from tf_outheads_zoo.stored import (LEGACY_RUN_FILE, RUN_FILE, stored_run_dict,
                                    stored_settings_path, without_init_keys)


def run_training(preset_name=None, run_dir=os.path.join("runs", DEFAULT_PRESET), overrides=None,
                 log=print, run_file=None):
    """Train, evaluate on dev and test, write translations; returns the results dict.

    `run_file`: a user's run file (YAML/JSON: `preset:` + the keys it changes,
    `tf_outheads_zoo.stored.load_run_config`) instead of `preset_name`.

    `preset_name` `None`: the run directory's own settings (`run.json`, or the
    `preset.json` of an older run directory), else `DEFAULT_PRESET`. Missing data files
    are refused before anything is written (`check_data_files`); so are a run directory
    trained with other settings (`resolve_run_config`; a `run.json` alone, from a start
    that failed, is replaced), a resume whose data files changed (`check_data_fingerprints`),
    and a directory another process is training in (`run_directory_lock`). A
    run already trained to its budget is not trained again: its stored results
    are returned (`finished_run`).

    Files written to `run_dir`: `run.json` (the `RunConfig`, `tf_outheads_zoo.stored`),
    `data_files.json` (size,
    modification time and SHA-256 of each data file), the SentencePiece model(s) and
    `tokenizer.json`, `checkpoints/best.weights.h5`, `model.keras` (the best
    dev-BLEU weights, or the average of the last `train.average_last`
    backups), `backup/` (atomic backups: weights, optimizer, data position),
    `logs/` (TensorBoard), `history.csv`, `bleu.jsonl`,
    `dev.hyp`, `test.hyp`, `results.json`, `loss_curves.csv` and
    `loss_curves.svg` (the loss of every step; with a ReWE head NLL and ReWE
    separately); with shared-private embeddings built from `pairs: "auto"`,
    `word_pairs.tsv` and `paired_embeddings_pca.svg` (Liu et al. 2019, Fig. 6). Re-running with the same
    `run_dir` reuses the tokenizer and resumes an interrupted training from
    `backup/` at the step it reached (same next batch, same optimizer state).

    `train.init_from` (a trained run directory) starts a new run from that run's
    model, pieces, pairs and target table (`tf_outheads_zoo.init_from`; with
    `train.update_vocab`, the new data's pieces merged in or instead); without
    `preset_name` or a run file, the parent's settings are the base.

    `train.strategy` / `train.num_gpus` choose the `tf.distribute` strategy
    (`tf_outheads.training.make_strategy`), `train.precision` the dtype
    policy. In a multi-worker job (`TF_CONFIG`) every worker runs this with
    the same `run_dir` on a shared filesystem: the chief (worker 0) writes
    `run_dir` and evaluates; the others keep their files in
    `run_dir/workers/<index>/` and return after training.
    """
    start = time.time()
    overrides = dict(overrides or {})
    parent = None
    if overrides.get("train.init_from"):
        overrides["train.init_from"] = os.path.abspath(overrides["train.init_from"])
    if overrides.get("train.init_from") and stored_settings_path(run_dir) is None:
        # A new run starts from its parent's settings.
        parent_name, parent_config = init_from.parent_run(overrides["train.init_from"])
        parent = parent_name, without_init_keys(parent_config)
    preset_name, config = resolve_run_config(preset_name, run_dir, overrides, run_file,
                                             log=log, parent=parent)
    check_components(config)  # every registered name it gives, before anything is written
    parent_dir = config.train.init_from
    for key in ("init_optimizer", "update_vocab"):
        if getattr(config.train, key) and not parent_dir:
            raise ConfigError(f"train.{key} applies to a run started from another: give "
                              f"train.init_from (--init-from RUN). Received: train.{key}="
                              f"{getattr(config.train, key)!r}")
    # Checked once, at the first start: a resume has its copies (and its stored settings).
    if parent_dir and not os.path.exists(os.path.join(run_dir, init_from.INIT_FILE)):
        init_from.check_compatible(init_from.parent_run(parent_dir)[1], config, parent_dir)
        init_from.check_parent_files(parent_dir)  # safe to load, complete: then copied
    check_data_files(config.data, run_dir)
    train_config = config.train
    strategy = tfo_strategy.make_strategy(train_config.strategy,
                                          num_gpus=train_config.num_gpus)
    chief = tfo_strategy.is_chief(strategy)
    backup_dir = os.path.join(run_dir, "backup")
    resource_dir = run_dir  # tokenizer, word pairs, vectors: the chief's, shared
    if not chief:
        run_dir = os.path.join(run_dir, "workers", str(strategy.cluster_resolver.task_id))
    with run_directory_lock(run_dir):
        if not chief:  # a worker's own directory must fit too
            preset_name, config = resolve_run_config(preset_name, run_dir, overrides,
                                                     run_file, log=log)
        finished = finished_run(run_dir, backup_dir, train_config) if chief else None
        if finished is not None:
            log(f"[train] {run_dir} is already trained to step {finished.get('steps')} "
                f"(train.max_steps {train_config.max_steps}, train.max_minutes "
                f"{train_config.max_minutes}): nothing to do. Its results: "
                f"{os.path.join(run_dir, 'results.json')}; raise --max-steps or "
                "--max-minutes to train on.")
            return finished
        # Refused here, before anything is written: data files changed since the run began.
        fingerprints = check_data_fingerprints(run_dir, config.data, log=log) if chief else None
        tfo_backup.write_atomically(
            os.path.join(run_dir, RUN_FILE),
            lambda path: write_json(path, stored_run_dict(config, preset_name)))
        legacy = os.path.join(run_dir, LEGACY_RUN_FILE)  # an older directory's: now run.json
        if os.path.exists(legacy):
            os.remove(legacy)
        if chief:
            tfo_backup.write_atomically(os.path.join(run_dir, DATA_FILES),
                                        lambda path: write_json(path, fingerprints))
            if parent_dir:
                init_from.inherit(parent_dir, run_dir, config.train.update_vocab,
                                  log=log)
        previous_policy = keras.config.dtype_policy().name
        tfo_strategy.set_precision(train_config.precision)
        try:
            return _run_training(preset_name, config, run_dir, resource_dir, backup_dir,
                                 strategy, chief, start, log)
        finally:
            keras.config.set_dtype_policy(previous_policy)


@dataclasses.dataclass
class _RunData:
    """What `_prepare_data` gives the later steps."""

    splits: dict  # "dev", "test": ParallelCorpus in memory
    sample: object  # the pairs SentencePiece, word alignment and word vectors learn from
    source_tokenizer: object
    target_tokenizer: object
    train_dataset: object
    dev_dataset: object
    per_worker_data: bool  # each worker reads its shard of a streamed corpus


def _run_training(preset_name, config, run_dir, resource_dir, backup_dir, strategy, chief,
                  start, log):
    keras.utils.set_random_seed(config.train.seed)
    train_config = config.train
    # Files all workers share are built by the chief, then loaded by the others.
    chief_first = functools.partial(tfo_strategy.chief_first, strategy)
    data = _prepare_data(config, resource_dir, strategy, chief_first, log)
    config, model, loss_keywords = _build_model(config, data, resource_dir, strategy,
                                                chief_first, log)
    _log_setup(model, config, strategy, backup_dir, log)
    record = _initialise(model, config, data, strategy, resource_dir, backup_dir, chief, log)
    callbacks, bleu = _fit(model, config, data, loss_keywords, run_dir, backup_dir, chief, log)
    # Training wall clock of every process that trained this run (a backup keeps it).
    train_seconds = next(c for c in callbacks if isinstance(c, TimeLimit)).elapsed()
    steps = int(model.optimizer.iterations.numpy())
    stopped = stopped_by(callbacks)
    log(f"[train] stopped at step {steps} by {budget_text(stopped, train_config)}")
    if not chief:
        log(f"[done] worker {run_dir}: {steps} steps; the chief evaluates and writes the model")
        return {"preset": preset_name, "run_dir": run_dir, "steps": steps, "chief": False,
                "stopped_by": stopped}

    _final_weights(model, data, run_dir, backup_dir, train_config.average_last, log)
    results = {"preset": preset_name, "run_dir": run_dir,
               "steps": steps,
               "stopped_by": stopped,
               "replicas": strategy.num_replicas_in_sync,
               "averaged_backups": train_config.average_last,
               "train_seconds": round(train_seconds, 1),
               "parameters": parameter_report(model).groups,
               "dev_bleu_history": bleu.history if bleu else []}
    if record is not None:
        results["init_from"] = record
    results.update(_evaluate(model, data, config.decode.options(), run_dir, log))
    results["total_seconds"] = round(time.time() - start, 1)
    write_json(os.path.join(run_dir, "results.json"), results)
    splits = data.splits
    dev_bleu, test_bleu = (results[split][f"bleu[{splits[split].target_name}]"]["score"]
                           for split in ("dev", "test"))
    log(f"[done] dev BLEU {dev_bleu:.2f}, test BLEU {test_bleu:.2f} "
        f"({results['steps']} steps, {results['total_seconds'] / 60:.1f} min)")
    return results


def _prepare_data(config, resource_dir, strategy, chief_first, log):
    """The splits, the tokenizers (built once, by the chief) and the datasets."""
    data_config, train_config = config.data, config.train
    training_data = TrainingData(data_config, seed=tokenizer_seed(config), log=log)
    splits = {split: read_split(data_config, split, log=log) for split in ("dev", "test")}
    log(f"[data] dev {len(splits['dev'])} pairs ({splits['dev'].origin}), test "
        f"{len(splits['test'])} ({splits['test'].origin})")
    # What SentencePiece, word alignment and word vectors learn from: the
    # cleaned training pairs, or a seeded sample of them (data.tokenizer_sample).
    train = training_data.sample
    tokenizer_start = time.time()
    # train.init_from: the parent's pieces (copied to resource_dir), or updated ones.
    inherited, update = config.train.init_from, config.train.update_vocab
    if inherited and update:
        build = functools.partial(init_from.updated_tokenizers, data_config, train,
                                  resource_dir, tokenizer_seed(config), update, log=log)
    elif inherited:
        build = functools.partial(tfo_data.load_tokenizers, resource_dir)
    else:
        build = functools.partial(
            tfo_data.build_tokenizers, train.sources, train.targets, resource_dir,
            vocab_size=data_config.vocab_size, joint=data_config.joint_vocabulary,
            model_type=data_config.tokenizer_type, seed=tokenizer_seed(config))
    source_tokenizer, target_tokenizer = chief_first(build)
    log(f"[data] tokenizer: {'updated, ' if update else 'inherited, ' if inherited else ''}"
        f"{data_config.tokenizer_type} "
        f"{'joint' if data_config.joint_vocabulary else 'separate'}, "
        f"vocab source {source_tokenizer.vocab_size} / target {target_tokenizer.vocab_size} "
        f"({time.time() - tokenizer_start:.0f} s)")
    # Several workers on a streamed corpus: each reads its own shard of the lines
    # and builds its share of the global batch (data.batch_tokens / workers).
    workers, worker = tfo_strategy.num_workers(strategy), tfo_strategy.worker_index(strategy)
    per_worker_data = training_data.streamed and workers > 1
    try:
        train_dataset = training_data.dataset(
            source_tokenizer, target_tokenizer, seed=train_config.seed,
            **(dict(num_shards=workers, shard_index=worker) if per_worker_data else {}))
    except ValueError as error:
        if "longer than the length limit" not in str(error):
            raise
        raise ConfigError(f"{_NO_PAIR_FITS.format(**vars(data_config))} ({error})") from None
    if per_worker_data:
        log(f"[data] worker {worker} of {workers}: reads the "
            f"lines whose position modulo {workers} is its index; batches of at most "
            f"{data_config.batch_tokens // workers} padded tokens (data.batch_tokens / "
            "workers)")
    del training_data
    dev_dataset = tfo_data.dataset_from_corpus(
        splits["dev"], source_tokenizer, target_tokenizer,
        batch_tokens=data_config.batch_tokens, shuffle=False,
    )
    # A known length lets Keras evaluate the finite dev set without warning
    # that the input "ran out of data".
    dev_batches = int(dev_dataset.reduce(0, lambda count, _: count + 1))
    dev_dataset = dev_dataset.apply(tf.data.experimental.assert_cardinality(dev_batches))
    return _RunData(splits, train, source_tokenizer, target_tokenizer, train_dataset,
                    dev_dataset, per_worker_data)


_NO_PAIR_FITS = ("no training pair fits the length limits: every pair is longer than "
                 "data.max_sequence_length={max_sequence_length} subword tokens (or than "
                 "data.batch_tokens={batch_tokens}); raise them")


def _build_model(config, data, resource_dir, strategy, chief_first, log):
    """`(config, model, loss keywords)`: the model built and compiled in `strategy.scope()`;
    the `RunConfig` with shared-private word pairs resolved (`pairs: "auto"`)."""
    data_config, train_config = config.data, config.train
    train, target_tokenizer = data.sample, data.target_tokenizer
    # Shared-private embeddings with `pairs: "auto"`: word pairs from eflomal
    # alignments of the training split, written to (and reused from) the run dir.
    # A run initialised from another: its parent's pairs (moved to the new pieces).
    tokenizers = (data.source_tokenizer, target_tokenizer)
    if train_config.init_from and (config.model.shared_private or {}).get("pairs") == "auto":
        maps = init_from.piece_maps(resource_dir, *tokenizers)
        model_config = chief_first(lambda: init_from.inherited_model_config(
            config.model, resource_dir, maps, tokenizers))
    else:
        model_config = chief_first(lambda: resolve_pairs(
            config.model, train, *tokenizers, resource_dir, log=log))
    config = dataclasses.replace(config, model=model_config)
    with strategy.scope():  # variables mirrored on every replica
        model = build_model(config, data.source_tokenizer.vocab_size,
                            target_tokenizer.vocab_size)
        # A continuous head, a ReWE head regressing pretrained vectors: one FastText table.
        readers = model.target_vector_layers()
        if readers:
            if train_config.update_vocab:  # new pieces' vectors in the parent's space
                chief_first(lambda: init_from.aligned_target_vectors(
                    data_config, train, target_tokenizer, resource_dir, train_config.seed,
                    log=log))
            table = chief_first(lambda: prepare_target_vectors(
                data_config, train, target_tokenizer, resource_dir, train_config.seed,
                log=log))
            for layer in readers:
                layer.set_target_vectors(table.vectors)
        loss_keywords = training_loss(config.train)
        compile_for_translation(model, optimizer=build_optimizer(config), **loss_keywords)
    return config, model, loss_keywords


def _initialise(model, config, data, strategy, resource_dir, backup_dir, chief, log):
    """With `train.init_from`: the parent's weights (and optimizer, with
    `train.init_optimizer`); on a fresh start the dev loss they give, logged and
    recorded in `init_from.json`. Returns that record (`None` without `init_from`)."""
    train_config = config.train
    if not train_config.init_from:
        return None
    record_path = os.path.join(resource_dir, init_from.INIT_FILE)
    with open(record_path, encoding="utf-8") as f:
        record = json.load(f)
    if tfo_backup.BackupManager(backup_dir).checkpoints():  # a resume: its backup has it all
        log(f"[init] started from {record['run_dir']}; resuming from this run's own backup")
        return record
    features, _ = next(iter(data.dev_dataset.take(1)))
    with strategy.scope():
        model(features, training=False)  # builds every variable
        maps = init_from.piece_maps(resource_dir, data.source_tokenizer,
                                    data.target_tokenizer)
        report = init_from.load_parent_weights(model, resource_dir, config, maps)
        if train_config.init_optimizer:
            step = init_from.restore_optimizer(model, train_config.init_from)
            log(f"[init] optimizer moments and step count from the parent's backup of step "
                f"{step}: the schedule goes on from there")
    if chief and "dev_loss_at_start" not in record:
        loss = model.evaluate(data.dev_dataset, verbose=0, return_dict=True)["loss"]
        record["dev_loss_at_start"] = round(float(loss), 6)
        record["kept_rows"] = report["tables"]  # per piece-indexed table
        tfo_backup.write_atomically(record_path, lambda path: write_json(path, record))
    log(f"[init] weights of {record['run_dir']} ({record['preset']}); dev loss at the "
        f"start {record.get('dev_loss_at_start')}")
    return record


def _log_setup(model, config, strategy, backup_dir, log):
    """The model, devices, strategy, optimizer and parameters, logged once."""
    train_config, optimizer = config.train, model.optimizer
    log(f"[model] {type(model).__name__} {config.to_dict()['model']}")
    devices = [d.name.replace("/device:", "") for d in tf.config.list_logical_devices()
               if d.device_type in ("CPU", "GPU")]
    log(f"[devices] training on {', '.join(devices)} ({os.cpu_count()} CPU cores)")
    log(f"[train] strategy {type(strategy).__name__} ({strategy.num_replicas_in_sync} "
        f"replica(s)), precision {train_config.precision}, accumulation "
        f"{train_config.accumulation_steps}, XLA {train_config.jit_compile}, "
        f"{train_config.steps_per_execution} step(s) per execution, backups every "
        f"{train_config.backup_every_n_steps} steps in {backup_dir}")
    log(f"[optimizer] {type(optimizer).__name__} beta_2={optimizer.beta_2} "
        f"epsilon={optimizer.epsilon} clipnorm={optimizer.clipnorm} "
        f"global_clipnorm={optimizer.global_clipnorm}, learning rate "
        f"{train_config.learning_rate_schedule or train_config.learning_rate}")
    log(str(parameter_report(model)))


def _fit(model, config, data, loss_keywords, run_dir, backup_dir, chief, log):
    """Trains `model` with the translation callbacks and `LossCurves`; returns
    `(callbacks, the BLEU callback or None)`."""
    train_config = config.train
    callbacks, bleu = translation_callbacks(
        run_dir,
        dev_sources=data.splits["dev"].sources,
        dev_references=data.splits["dev"].targets,
        source_tokenizer=data.source_tokenizer,
        target_tokenizer=data.target_tokenizer,
        patience=train_config.patience,
        max_minutes=train_config.max_minutes,
        max_steps=train_config.max_steps,
        decode_options=config.decode.options(),
        chief=chief,
    )
    # The training losses step by step: with ReWE, NLL and ReWE separately (the
    # paper's Figure 3); plain runs write the same file, for comparing the two.
    rewe = getattr(model, "rewe", None)
    rewe_weight = loss_keywords.get("auxiliary_weights", {}).get("rewe")
    callbacks.append(LossCurves(
        os.path.join(run_dir, "loss_curves.csv"),
        None if rewe is None else (PAPER_REWE_WEIGHT if rewe_weight is None else rewe_weight),
        log=log))
    note = smaller_epochs_budget(train_config)
    if note:
        log(f"[train] {note}")
    try:
        _train_model(model, train_config, data, callbacks, backup_dir)
    except StopIteration:  # a streamed corpus whose pairs the pipeline all dropped
        raise ConfigError(_NO_PAIR_FITS.format(**vars(config.data)) + ". Nothing was trained."
                          ) from None
    return callbacks, bleu


def _train_model(model, train_config, data, callbacks, backup_dir):
    train_model(
        model,
        data.train_dataset,
        epochs=train_config.epochs,
        steps_per_epoch=train_config.steps_per_epoch,
        validation_data=data.dev_dataset,
        callbacks=callbacks,
        accumulation_steps=train_config.accumulation_steps,
        backup_dir=backup_dir,
        backup_every_n_steps=train_config.backup_every_n_steps,
        keep_backups=train_config.keep_backups,
        nonfinite=train_config.nonfinite,
        max_skipped_share=train_config.max_skipped_share,
        max_loss=train_config.max_loss,
        verbose=2 if os.environ.get("TF_OUTHEADS_QUIET") else "auto",
        per_worker_data=data.per_worker_data,
        jit_compile=train_config.jit_compile,
        steps_per_execution=train_config.steps_per_execution,
    )


def _final_weights(model, data, run_dir, backup_dir, average_last, log):
    """The final weights (the mean of the last `average_last` backups, else the best
    dev BLEU's) saved to `model.keras`; with word pairs, their figure."""
    best = os.path.join(run_dir, "checkpoints", "best.weights.h5")
    if average_last:
        paths = tfo_backup.BackupManager(backup_dir).last(average_last)
        tfo_backup.average_checkpoints(model, paths)
        log(f"[average] final weights: the mean of the last {len(paths)} backups "
            f"({', '.join(os.path.basename(p) for p in paths)})")
    elif os.path.exists(best):
        try:
            model.load_weights(best)
        except (OSError, ValueError) as error:  # h5py's errors on a truncated file
            raise RunDirectoryError(
                f"{best}: damaged, the best dev-BLEU weights cannot be read "
                f"({' '.join(str(error).split())[:200]}). Restore it, or delete it and run "
                "the same command again: the run then ends with its last weights.") from None
    model_path = os.path.join(run_dir, "model.keras")
    tfo_backup.write_atomically(model_path, functools.partial(
        save_model, model, source_tokenizer=data.source_tokenizer,
        target_tokenizer=data.target_tokenizer))
    pairs_path = os.path.join(run_dir, PAIRS_FILE)
    if os.path.exists(pairs_path):  # Liu et al. (2019) Figure 6 for this run
        figure = write_pair_figure(model, pairs_path, os.path.join(run_dir, FIGURE_FILE))
        if figure:
            log(f"[pairs] PCA of paired embeddings → {figure}")


def _evaluate(model, data, decode_config, run_dir, log):
    """`{"dev": scores, "test": scores}`: both splits translated (`dev.hyp`,
    `test.hyp`) and scored."""
    translator = Translator(model, data.source_tokenizer, data.target_tokenizer,
                            **decode_config)
    results = {}
    for split in ("dev", "test"):
        corpus = data.splits[split]
        hypotheses = translator.translate(corpus.sources)
        with open(os.path.join(run_dir, f"{split}.hyp"), "w", encoding="utf-8") as f:
            f.write("\n".join(hypotheses) + "\n")
        scores = evaluate_translations(hypotheses, corpus.reference_streams(),
                                       primary=corpus.target_name)
        log(f"[{split}] {len(hypotheses)} sentences → {os.path.join(run_dir, split + '.hyp')}")
        log(format_report(scores))
        results[split] = {name: {"score": s.score, "signature": s.signature}
                          for name, s in scores.items()}
    return results


def smaller_epochs_budget(train_config):
    """A note when `train.epochs × train.steps_per_epoch` steps end the run before
    `train.max_steps` does (the progress line counts to max_steps); else `None`."""
    epoch_steps = train_config.epochs * train_config.steps_per_epoch
    if train_config.max_steps is None or train_config.max_steps <= epoch_steps:
        return None
    return (f"train.max_steps {train_config.max_steps} is more than train.epochs × "
            f"train.steps_per_epoch = {train_config.epochs} × "
            f"{train_config.steps_per_epoch} = {epoch_steps} steps: the epochs budget "
            f"stops this run at step {epoch_steps} (raise train.epochs to train on)")


def budget_text(stopped, train_config):
    """`stopped` (`tf_outheads.training.callbacks.stopped_by`: `"max_steps"`, `"epochs"`,
    `"max_minutes"` or `"early_stopping"`) in words, with the settings behind it."""
    if stopped == "max_steps":
        return f"its step budget (train.max_steps {train_config.max_steps})"
    if stopped == "max_minutes":
        return f"its time budget (train.max_minutes {train_config.max_minutes:g})"
    if stopped == "early_stopping":
        return (f"early stopping (train.patience {train_config.patience} evaluations "
                "without a better dev score)")
    return (f"its epochs budget (train.epochs × train.steps_per_epoch = "
            f"{train_config.epochs} × {train_config.steps_per_epoch} steps)")

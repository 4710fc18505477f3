"""Damaged files around a run's model (issue 54): `train --init-from` a parent whose
`model.keras` is crafted or truncated is refused in one line before anything is copied,
and the same command works once the parent is repaired; a full temporary directory
while a model loads is named as such, never as a damaged model."""

import errno
import os
import shutil

import pytest

from tests.corpus import write_corpus_slice
from tests.zoo.test_cli import _craft
from tf_outheads_zoo import cli, errors, runs

TINY = ["--set", "data.vocab_size=300", "--set", "train.steps_per_epoch=1",
        "--set", "decode.max_length_offset=3"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus_slice(tmp_path_factory.mktemp("corpus") / "small.tsv", 300, 8, 8)


@pytest.fixture(scope="module")
def parent_run(corpus, tmp_path_factory):
    """A trained lstm-tiny run (1 step): the healthy parent, copied by each test."""
    run_dir = str(tmp_path_factory.mktemp("parent"))
    cli.main(["train", "--preset", "lstm-tiny", "--run-dir", run_dir, "--corpus", corpus,
              "--max-steps", "1", *TINY])
    return run_dir


def _child_command(child_dir, parent_dir, corpus):
    return ["train", "--run-dir", str(child_dir), "--corpus", corpus, "--init-from",
            str(parent_dir), "--max-steps", "1", *TINY]


def _damage(model_file, damage):
    if damage == "crafted":  # its config names `os.system`
        _craft(model_file)
        return
    with open(model_file, "rb") as f:
        data = f.read()
    with open(model_file, "wb") as f:
        f.write(data[:len(data) // 2])


@pytest.mark.parametrize("damage", ["crafted", "truncated"])
def test_a_damaged_parent_model_is_refused_before_anything_is_copied(
        parent_run, corpus, tmp_path, capsys, monkeypatch, damage):
    parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
    shutil.copytree(parent_run, parent_dir)
    model_file = parent_dir / "model.keras"
    _damage(model_file, damage)
    monkeypatch.chdir(tmp_path)  # where a crafted `touch PWNED` would write
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        cli.main(_child_command(child_dir, parent_dir, corpus))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: train.init_from={str(parent_dir)!r}: {model_file}: not a "
                          "readable .keras model, damaged"), err
    # Not Keras' "File not found" of a file that is there, nor a TypeError traceback.
    assert "File not found" not in err and "Traceback" not in err
    assert ("TypeError: Could not locate class 'system'" if damage == "crafted"
            else "BadZipFile: not a complete zip archive") in err
    assert not (tmp_path / "PWNED").exists()  # nothing of the crafted file ran
    assert not child_dir.exists()  # nothing copied, nothing written


@pytest.mark.slow  # a CLI training after the repair (~12 s); the refusals stay fast
def test_the_same_command_works_once_the_parent_is_repaired(parent_run, corpus, tmp_path,
                                                            capsys):
    parent_dir, child_dir = tmp_path / "parent", tmp_path / "child"
    shutil.copytree(parent_run, parent_dir)
    _damage(parent_dir / "model.keras", "truncated")
    command = _child_command(child_dir, parent_dir, corpus)
    with pytest.raises(SystemExit):
        cli.main(command)
    assert "not a readable .keras model" in capsys.readouterr().err
    shutil.copyfile(os.path.join(parent_run, "model.keras"), parent_dir / "model.keras")
    cli.main(command)
    assert (child_dir / "init_from.json").exists()
    assert ((child_dir / "init_model.keras").read_bytes()
            == (parent_dir / "model.keras").read_bytes())


def _raise(error):
    def load_model(*args, **kwargs):
        raise error
    return load_model


def _wrapped(cause, how):
    """`cause` inside another exception, as Keras may raise it: `raise ... from` it, or
    raised while handling it."""
    try:
        try:
            raise cause
        except OSError as error:
            if how == "from":
                raise ValueError("Could not load the weights") from error
            raise RuntimeError("Could not load the weights")  # its __context__ only
    except (ValueError, RuntimeError) as error:
        return error


@pytest.mark.parametrize("error", [
    OSError(errno.ENOSPC, "No space left on device"),
    OSError(errno.EFBIG, "File too large"),  # ulimit -f: SIGXFSZ ignored, EFBIG
    OSError(errno.EDQUOT, "Disk quota exceeded"),
    _wrapped(OSError(errno.ENOSPC, "No space left on device"), "from"),
    _wrapped(OSError(errno.EFBIG, "File too large"), "context"),
], ids=["ENOSPC", "EFBIG", "EDQUOT", "wrapped-cause", "wrapped-context"])
def test_no_room_for_the_temporary_files_is_not_a_damaged_model(
        parent_run, capsys, monkeypatch, tmp_path, error):
    monkeypatch.setattr(runs.keras.saving, "load_model", _raise(error))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(runs.tempfile, "tempdir", None)  # read TMPDIR again
    model_file = os.path.join(parent_run, "model.keras")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["translate", "--run-dir", parent_run, "--input", "-"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"error: no space left for the temporary files of loading "
                          f"{model_file} (TMPDIR={tmp_path}: "), err
    assert "free space or set TMPDIR" in err
    for wrong in ("not a readable", "damaged or", "delet", "out of memory",
                  "a training run resumes"):
        assert wrong not in err, err


def test_other_load_failures_still_name_a_damaged_model(parent_run, monkeypatch, tmp_path):
    model_file = os.path.join(parent_run, "model.keras")
    monkeypatch.setattr(runs.keras.saving, "load_model",
                        _raise(OSError(errno.EIO, "Input/output error")))
    with pytest.raises(ValueError, match="not a readable .keras model, damaged"):
        runs.load_model_file(model_file)
    monkeypatch.undo()
    truncated = tmp_path / "model.keras"
    with open(model_file, "rb") as f:
        truncated.write_bytes(f.read()[:1000])
    with pytest.raises(ValueError, match=r"model.keras: not a readable .keras model, damaged "
                                         r".*\(BadZipFile: not a complete zip archive"):
        runs.load_model_file(str(truncated))
    assert runs.load_model_file(model_file, compile=False) is not None  # the healthy one


def test_a_word_holding_oom_is_not_out_of_memory():
    # "room" in the message, "broom" in a path: only TensorFlow's "OOM when ..." is.
    assert "out of memory" not in errors.error_message(OSError("runs/broom: no room left"))
    assert "out of memory" in errors.error_message(OSError("OOM when allocating tensor"))

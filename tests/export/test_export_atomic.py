"""Issue 54 (item 2): an export is written whole beside its directory, then renamed into
place, so a crash or a kill never leaves a half-written export where an older one was;
a directory that is not an export is never overwritten."""

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece ops a SavedModel load needs)

from tf_outheads.export import export_translator
from tf_outheads.export.atomic import check_export_directory, replace_directory
from tf_outheads_zoo import cli, runs
from tf_outheads_zoo.config import RunConfig
from tf_outheads_zoo.study import export_winner

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Above Linux's largest pid (PID_MAX_LIMIT, 2**22): a process that cannot be running.
DEAD_PID = 2**22 + 1


def tree(path):
    """relative path → sha256 of every file under `path` (`{}` for nothing there)."""
    files = {}
    for directory, _, names in os.walk(path):
        for name in names:
            full = os.path.join(directory, name)
            with open(full, "rb") as f:
                files[os.path.relpath(full, path)] = hashlib.sha256(f.read()).hexdigest()
    return files


def config_of(path):
    with open(os.path.join(path, "assets.extra", "tf_outheads_export.json")) as f:
        return json.load(f)


def translates(path):
    """`path` loads (as a server would) and its `serving_default` answers."""
    loaded = tf.saved_model.load(str(path))
    outputs = loaded.signatures["serving_default"](sources=tf.constant(["Dios es amor."]))
    return outputs["translations"].shape == (1, 1)


@pytest.mark.slow  # an export (~13 s): the fast suite is at its 10-minute budget
def test_a_crash_midway_leaves_the_older_export_loadable_and_unchanged(
        export_of, tiny_models, tokenizer, tmp_path, monkeypatch):
    target = tmp_path / "1"
    shutil.copytree(export_of("tied"), target)
    before = tree(target)
    real_save = tf.saved_model.save

    def save_then_crash(module, directory, signatures=None, **kwargs):
        # The new variables are written where the export writes, its saved_model.pb is
        # not: the moment of the reported kill -9.
        real_save(module, str(tmp_path / "scratch"), signatures=signatures, **kwargs)
        shutil.copytree(tmp_path / "scratch" / "variables", os.path.join(directory, "variables"),
                        dirs_exist_ok=True)
        raise OSError("stands for a kill: variables written, saved_model.pb not yet")

    monkeypatch.setattr(tf.saved_model, "save", save_then_crash)
    with pytest.raises(OSError, match="stands for a kill"):
        export_translator(tiny_models["joint"], tokenizer, tokenizer, str(target),
                          beam_sizes=(1,))
    assert tree(target) == before
    assert sorted(os.listdir(tmp_path)) == ["1", "scratch"]  # its temporary one removed
    assert translates(target)


@pytest.fixture(scope="module")
def reexported_winner(export_of, tiny_models, tokenizer, tmp_path_factory):
    """`study --export-winner DIR` again, DIR holding the older winner's export and
    winner.json, beside it what two killed exports left and names to leave alone."""
    root = tmp_path_factory.mktemp("study")
    target = root / "winner"
    shutil.copytree(export_of("tied"), target)
    (target / "winner.json").write_text(json.dumps({"arm": "tied", "seed": 1}))
    stale = [f".winner.tmp-{DEAD_PID}-0123abcd", f".winner.old-{DEAD_PID}-89abcdef"]
    for name in stale:
        (root / name / "variables").mkdir(parents=True)
        (root / name / "variables" / "variables.index").write_bytes(b"half written")
    kept = {".winner.tmp-1-0123abcd": "pid 1 is running",
            ".winner.tmp-0123abcd": "no pid",
            "winner.tmp-4194305-0123abcd": "not hidden",
            f".other.tmp-{DEAD_PID}-0123abcd": "another export's"}
    for name, text in kept.items():
        (root / name).write_text(text)
    inode = os.stat(target).st_ino
    numbers = {"title": "atomic", "winner": {
        "run_dir": str(root / "runs" / "joint" / "s2"), "arm": "joint", "seed": 2,
        "metric": "dev_bleu", "value": 1.25}}
    logs = []
    with pytest.MonkeyPatch.context() as patch:  # the winner's run: the tiny joint model
        patch.setattr(runs, "load_run", lambda run_dir: (tiny_models["joint"], tokenizer,
                                                         tokenizer, RunConfig()))
        start = time.perf_counter()
        path = export_winner(numbers, str(target), log=logs.append)
        seconds = time.perf_counter() - start
    return {"root": root, "target": target, "path": path, "inode": inode, "stale": stale,
            "kept": kept, "logs": logs, "seconds": seconds,
            "head_cache": sorted(tiny_models["joint"].head.inference_cache())}


@pytest.mark.slow  # the module's one export (~15 s), shared with the next test
def test_a_reexport_replaces_the_directory_whole_and_leaves_no_temporary(reexported_winner):
    result = reexported_winner
    target = result["target"]
    assert result["path"] == str(target)
    # Renamed into place (a new directory), not written into the old one.
    assert os.stat(target).st_ino != result["inode"]
    assert config_of(target)["head_cache"] == result["head_cache"]
    with open(target / "winner.json") as f:
        assert json.load(f)["arm"] == "joint"  # the new winner's, written after it
    assert sorted(os.listdir(result["root"])) == sorted(["winner", *result["kept"]])
    # Complete: the new model's variables (loading this 5-width export takes ~30 s; the
    # crash test loads one).
    variables = dict(tf.train.list_variables(str(target / "variables" / "variables")))
    assert any("head_cache" in name for name in variables)
    assert {"saved_model.pb", "fingerprint.pb"} <= set(os.listdir(target))


@pytest.mark.slow  # the module's one export
def test_the_next_export_removes_what_killed_exports_left(reexported_winner):
    root = reexported_winner["root"]
    for name in reexported_winner["stale"]:
        assert not (root / name).exists()
    for name, text in reexported_winner["kept"].items():  # nothing of another name
        assert (root / name).read_text() == text


REFUSED = {  # what the target holds → a name the message gives besides the path
    "files": {"notes.txt": b"mine"},
    "winner.json alone": {"winner.json": b"{}"},
    "a model's base path": {"1/saved_model.pb": b"pb", "1/variables/variables.index": b"x"},
    "an export and a file": {"saved_model.pb": b"pb", "variables/variables.index": b"x",
                             "notes.txt": b"mine"},
    "an export and a warm-up file": {"saved_model.pb": b"pb",
                                     "assets.extra/tf_serving_warmup_requests": b"x"},
}


def fill(target, files):
    for name, content in files.items():
        (target / name).parent.mkdir(parents=True, exist_ok=True)
        (target / name).write_bytes(content)


@pytest.mark.parametrize("files", REFUSED.values(), ids=REFUSED)
def test_a_directory_that_is_not_an_export_is_refused_untouched(tiny_models, tokenizer,
                                                                tmp_path, files):
    target = tmp_path / "out"
    fill(target, files)
    with pytest.raises(FileExistsError, match="would not overwrite") as error:
        export_translator(tiny_models["tied"], tokenizer, tokenizer, str(target))
    assert str(target) in str(error.value)
    if "saved_model.pb" in files:  # the files in the way are named
        assert "notes.txt" in str(error.value) or "tf_serving_warmup" in str(error.value)
    assert tree(target) == tree_of(files)
    assert os.listdir(tmp_path) == ["out"]


def tree_of(files):
    return {name: hashlib.sha256(content).hexdigest() for name, content in files.items()}


def test_a_file_in_the_way_is_refused(tiny_models, tokenizer, tmp_path):
    (tmp_path / "out").write_text("mine")
    with pytest.raises(FileExistsError, match=re.escape(f"{tmp_path / 'out'} exists and is "
                                                        "not a directory")):
        export_translator(tiny_models["tied"], tokenizer, tokenizer, str(tmp_path / "out"))
    assert (tmp_path / "out").read_text() == "mine"


def test_the_export_command_refuses_before_loading_the_run(tmp_path, capsys):
    target = tmp_path / "out"
    fill(target, {"notes.txt": b"mine"})
    with pytest.raises(SystemExit) as exit_status:
        cli.main(["export", "--run-dir", str(tmp_path / "no-such-run"), "--output",
                  str(target)])
    assert exit_status.value.code == 2
    message = capsys.readouterr().err
    assert message.startswith(f"error: {target} is not empty") and "would not overwrite" in message
    assert tree(target) == tree_of({"notes.txt": b"mine"})


def test_an_empty_or_absent_directory_takes_an_export(tmp_path):
    def write(directory):
        fill(pathlib.Path(directory), {"saved_model.pb": b"pb", "assets.extra/"
                                       "tf_outheads_export.json": b"{}"})

    (tmp_path / "empty").mkdir()
    check_export_directory(tmp_path / "empty")
    for name in ("empty", "absent/1"):
        assert replace_directory(tmp_path / name, write) == str(tmp_path / name)
        assert set(tree(tmp_path / name)) == {"saved_model.pb",
                                              os.path.join("assets.extra",
                                                           "tf_outheads_export.json")}
    assert sorted(os.listdir(tmp_path)) == ["absent", "empty"]
    assert os.listdir(tmp_path / "absent") == ["1"]


CHILD = """
import pathlib, sys, time
root, proto, target, marker = sys.argv[1:]
sys.path.insert(0, root)
from tensorflow.python.lib.io import file_io
from tests.export.conftest import tiny_model
from tf_outheads import data
from tf_outheads.export import export_translator

write = file_io.atomic_write_string_to_file

def held(path, *args, **kwargs):  # variables written, saved_model.pb next: wait there
    if str(path).endswith("saved_model.pb"):
        pathlib.Path(marker).touch()
        time.sleep(600)
    return write(path, *args, **kwargs)

file_io.atomic_write_string_to_file = held
tokenizer = data.SubwordTokenizer.from_bytes(pathlib.Path(proto).read_bytes())
export_translator(tiny_model("joint", tokenizer.vocab_size), tokenizer, tokenizer, target,
                  beam_sizes=(1,))
"""


@pytest.mark.slow  # a process importing TensorFlow, killed; two exports
def test_kill_9_midway_leaves_the_older_export_and_the_next_export_cleans_up(
        export_of, tiny_models, tokenizer, tmp_path):
    models = tmp_path / "models"
    target = models / "1"
    shutil.copytree(export_of("tied"), target)
    before = tree(target)
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "tokenizer.model").write_bytes(tokenizer.model_proto)
    marker = tmp_path / "variables-written"
    with open(tmp_path / "child.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, str(tmp_path / "child.py"), str(ROOT),
             str(tmp_path / "tokenizer.model"), str(target), str(marker)],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
        deadline = time.monotonic() + 600
        while not marker.exists():
            assert process.poll() is None, (tmp_path / "child.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the export did not reach saved_model.pb"
            time.sleep(0.1)
        process.kill()  # SIGKILL
        process.wait()
    assert tree(target) == before
    assert translates(target)
    leftovers = [name for name in os.listdir(models) if name != "1"]
    assert len(leftovers) == 1 and re.fullmatch(rf"\.1\.tmp-{process.pid}-[0-9a-f]{{8}}",
                                                leftovers[0]), leftovers

    export_translator(tiny_models["joint"], tokenizer, tokenizer, str(target), beam_sizes=(1,))
    assert os.listdir(models) == ["1"]
    assert config_of(target)["head_cache"] == sorted(tiny_models["joint"].head.inference_cache())
    assert translates(target)

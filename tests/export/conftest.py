"""Tiny models of three heads, their SavedModels, and a server-like reload.

Every model is an `LSTMSeq2Seq` of size 16 on the ~1000-piece Bible tokenizer
of `tests/conftest.py` with random weights from U(-0.5, 0.5): its outputs
differ from sentence to sentence and its distributions are peaked (a few dozen
training steps only reach `", , , ,"` for every sentence), at no training
cost. The SavedModels are loaded once, in one separate process that imports
only TensorFlow and tensorflow-text (`load_and_translate.py`), which answers
every call the tests make.
"""

import base64
import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from tf_outheads import data
from tf_outheads.data.special_tokens import UNK_ID
from tf_outheads.export import export_translator
from tf_outheads_zoo.lstm import LSTMSeq2Seq

LOADER = pathlib.Path(__file__).with_name("load_and_translate.py")
SIZE = 16
BEAM = 4
HEADS = {
    "tied": "tied",
    "joint": {"class_name": "joint", "config": {"joint_dim": 24}},
    "vmf": {"class_name": "continuous", "config": {"output_dim": SIZE}},
}



def load_script(name):
    """A script of `serving/` (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(name, SERVING / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

@pytest.fixture(scope="session")
def spanish_test_verses(bible_corpus_path):
    """Eight verses of the embedded corpus's test split (Spanish)."""
    return data.read_tsv(bible_corpus_path, split="test").sources[:8]


@pytest.fixture(scope="session")
def english_test_verses(bible_corpus_path):
    """Their English references (`en_web`)."""
    return data.read_tsv(bible_corpus_path, split="test").targets[:8]


def tiny_model(name, vocabulary_size, seed=7):
    """Random weights drawn from U(-0.5, 0.5): peaked, source-dependent outputs."""
    keras.utils.set_random_seed(seed)
    model = LSTMSeq2Seq(vocabulary_size, vocabulary_size, embedding_dim=SIZE, hidden_dim=SIZE,
                        num_layers=1, dropout=0.0, head=HEADS[name], uniform_init=0.5)
    if name == "vmf":
        vectors = np.random.default_rng(seed).normal(size=(vocabulary_size, SIZE))
        vectors[0] = 0.0  # <pad>
        model.head.set_target_vectors(vectors.astype("float32"))
    return model


@pytest.fixture(scope="session")
def tokenizer(bible_tokenizer):
    return data.SubwordTokenizer.from_bytes(bible_tokenizer.model_proto)


@pytest.fixture(scope="session")
def tiny_models(bible_tokenizer):
    return {name: tiny_model(name, bible_tokenizer.vocab_size) for name in HEADS}


@pytest.fixture(scope="session")
def unk_model(bible_tokenizer):
    """Random weights whose softmax head says `<unk>` at every step."""
    keras.utils.set_random_seed(3)
    model = LSTMSeq2Seq(bible_tokenizer.vocab_size, bible_tokenizer.vocab_size,
                        embedding_dim=SIZE, hidden_dim=SIZE, num_layers=1, head="softmax")
    bias = np.zeros(bible_tokenizer.vocab_size, np.float32)
    bias[UNK_ID] = 100.0
    model.head.bias.assign(bias)
    return model


@pytest.fixture(scope="session")
def export_of(tiny_models, tokenizer, tmp_path_factory, request):
    """`export_of(name)` → SavedModel path, exported on first use (once per session).

    Names: the three heads of `HEADS` (greedy default, beam sizes 1 and `BEAM`)
    and `"unk"` (the <unk> model, `replace_unk` on by default).
    """
    root = tmp_path_factory.mktemp("exports")
    paths = {}

    def export(name):
        if name not in paths:
            if name == "unk":
                paths[name] = export_translator(
                    request.getfixturevalue("unk_model"), tokenizer, tokenizer,
                    str(root / name / "1"), replace_unk=True, max_length_offset=0,
                    beam_sizes=(1,))
            else:
                paths[name] = export_translator(tiny_models[name], tokenizer, tokenizer,
                                                str(root / name / "1"), beam_sizes=(1, BEAM))
        return paths[name]

    return export


def encode(texts):
    return [base64.b64encode(text if isinstance(text, bytes) else text.encode("utf-8"))
            .decode("ascii") for text in texts]


class Server:
    """Collects calls; `run()` answers all of them from one server-like process."""

    def __init__(self, exports):
        self.exports = exports
        self.calls = []
        self.response = None

    def call(self, export, sources, signature=None, **options):
        """Queue a call; returns its index in `results()`."""
        inputs = {"sources": encode(sources)}
        if "targets" in options:  # the `score` signature
            inputs["targets"] = encode(options.pop("targets"))
            signature = "score"
        inputs.update({key: value if isinstance(value, list) else [value]
                       for key, value in options.items()})
        signature = signature or ("translate" if options else "serving_default")
        self.calls.append({"export": export, "signature": signature, "inputs": inputs})
        return len(self.calls) - 1

    def run(self):
        request = json.dumps({"exports": self.exports, "calls": self.calls})
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
        # Started outside the repository, so nothing of it is importable by accident.
        result = subprocess.run([sys.executable, str(LOADER)], input=request, env=env,
                                capture_output=True, text=True, timeout=600, cwd="/")
        assert result.returncode == 0, result.stderr[-3000:]
        self.response = json.loads(result.stdout)
        return self.response


SERVING = pathlib.Path(__file__).resolve().parents[2] / "serving"


def start_rest_emulator(model_dir, port_file, *extra):
    """`(process, port)` of `serving/rest_emulator.py` serving `model_dir` on 127.0.0.1
    (a free port, written to `port_file`); fails the test if it does not start."""
    import pytest

    process = subprocess.Popen(
        [sys.executable, str(SERVING / "rest_emulator.py"), "--model-dir", model_dir,
         "--port", "0", "--port-file", str(port_file), *extra],
        cwd="/", env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not port_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"the REST stand-in did not start: {process.communicate()[1][-2000:]}")
        time.sleep(0.2)
    return process, int(port_file.read_text())

"""Without the optional extra: the library imports, and a CTranslate2 export or engine says
how to install it, in one line from the CLI (issue 57)."""

import sys

import pytest

from tf_outheads.export import CTranslate2Translator, to_ctranslate2
from tf_outheads_zoo import cli


@pytest.fixture
def no_ctranslate2(monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # `import ctranslate2` fails


def test_the_export_and_the_engine_say_how_to_install_it(no_ctranslate2, tmp_path):
    with pytest.raises(ImportError, match=r"CTranslate2 is not installed: pip install "
                                          r"'tf_outheads\[ctranslate2\]'"):
        to_ctranslate2(object(), None, None, str(tmp_path / "ct2"))
    with pytest.raises(ImportError, match=r"pip install 'tf_outheads\[ctranslate2\]'"):
        CTranslate2Translator(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_the_commands_refuse_in_one_line(no_ctranslate2, tmp_path, capsys):
    source_file = tmp_path / "s.txt"
    source_file.write_text("Amén.\n", encoding="utf-8")
    for argv in (["export", "--run-dir", str(tmp_path), "--output", str(tmp_path / "ct2"),
                  "--format", "ctranslate2"],
                 ["translate", "--engine", "ctranslate2", "--model", str(tmp_path),
                  "--input", str(source_file)]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "tf_outheads[ctranslate2]" in err
    assert not (tmp_path / "ct2").exists()

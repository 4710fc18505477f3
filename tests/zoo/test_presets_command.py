"""`tf-outheads presets`: every preset listed, docs/presets.md is its Markdown output."""

import pathlib
import subprocess
import sys

import pytest

from tf_outheads_zoo import catalogue, cli
from tf_outheads_zoo.presets import PRESETS

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _run(capsys, *argv):
    cli.main(["presets", *argv])
    return capsys.readouterr().out


def test_every_preset_is_listed_with_its_description(capsys):
    lines = _run(capsys).splitlines()
    names = {line.split()[0] for line in lines if line.startswith("  ") and line[2] != " "}
    assert names == set(PRESETS)


def test_every_preset_has_a_one_line_description():
    for name, preset in PRESETS.items():
        assert isinstance(preset.get("description"), str) and preset["description"].strip(), name
        assert "\n" not in preset["description"], name


def test_docs_presets_md_is_the_markdown_output(capsys):
    # Regenerate with: tf-outheads presets --markdown > docs/presets.md
    expected = _run(capsys, "--markdown")
    assert (ROOT / "docs" / "presets.md").read_text(encoding="utf-8") == expected


def test_markdown_has_one_row_of_four_cells_per_preset(capsys):
    catalogue = _run(capsys, "--markdown").split("\n## Settings\n")[0]
    rows = [line for line in catalogue.splitlines() if line.startswith("| `")]
    assert sorted(row.split("`")[1] for row in rows) == sorted(PRESETS)
    for row in rows:
        # Cells are split at unescaped pipes only (|V| is written \|V\|).
        assert row.replace("\\|", "").count("|") == 5, row


def test_every_family_has_a_title():
    families = {"-".join(name.split("-")[:2]) for name in PRESETS}
    assert families <= set(catalogue.PRESET_FAMILIES)


@pytest.mark.parametrize("argv", [[], ["--markdown"]], ids=["plain", "markdown"])
def test_presets_do_not_import_tensorflow(argv):
    # A fresh interpreter: the test process has TensorFlow loaded already.
    code = (
        "import sys\n"
        "from tf_outheads_zoo import cli\n"
        f"args = cli.build_parser().parse_args(['presets', *{argv!r}])\n"
        "args.func(args)\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'keras', 'tf_outheads'))\n"
        "assert not loaded, loaded[:5]\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_settings_reference_lists_every_key_of_the_schema(capsys):
    from tf_outheads_zoo.config import SECTIONS, section_fields
    from tf_outheads_zoo.model_config import MODEL_TYPES

    settings = _run(capsys, "--markdown").split("\n## Settings\n")[1]
    rows = [line for line in settings.splitlines() if line.startswith("| `")]
    expected = {key for section in SECTIONS for model_type in MODEL_TYPES
                for key in section_fields(section, model_type)}
    assert {row.split("`")[1] for row in rows} == expected
    for row in rows:  # key, type, default, doc
        assert row.replace("\\|", "").count("|") == 5, row

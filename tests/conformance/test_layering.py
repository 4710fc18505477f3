"""The package's floors: a module imports nothing from a floor above its own.

`tf_outheads.models` holds an objective (`tf_outheads.losses.objective`) and is
driven by the trainer, so it imports nothing from `tf_outheads.training`; the
losses, below both, import neither. Every import counts, at module level or
inside a function, in any of its spellings (`import tf_outheads.training.x`,
`from tf_outheads.training import x`, `from tf_outheads import training`).
"""

import ast
import pathlib

import pytest

import tf_outheads

PACKAGE = pathlib.Path(tf_outheads.__file__).parent

# (package whose modules are checked, packages they must not import)
FLOORS = [
    ("models", ("tf_outheads.training",)),
    ("losses", ("tf_outheads.models", "tf_outheads.training")),
]


def imported_modules(source):
    """`(line, module)` of every import in `source`, `from a import b` as `a.b` too."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def forbidden_imports(source, forbidden):
    """`["line N: module"]` of the imports of `source` inside any of `forbidden`."""
    return [f"line {line}: {module}" for line, module in imported_modules(source)
            if any(module == name or module.startswith(name + ".") for name in forbidden)]


@pytest.mark.parametrize("package, forbidden", FLOORS, ids=[floor for floor, _ in FLOORS])
def test_package_imports_no_floor_above_it(package, forbidden):
    modules = sorted((PACKAGE / package).glob("*.py"))
    assert modules
    found = {module.name: forbidden_imports(module.read_text(encoding="utf-8"), forbidden)
             for module in modules}
    assert not {name: hits for name, hits in found.items() if hits}


@pytest.mark.parametrize("source", [
    "from tf_outheads.training.trainer import Trainer",
    "import tf_outheads.training.trainer",
    "from tf_outheads import training",
    "def f():\n    from tf_outheads.training import Trainer",
])
def test_forbidden_imports_finds_every_spelling(source):
    assert forbidden_imports(source, ("tf_outheads.training",))


@pytest.mark.parametrize("source", [
    "from tf_outheads.losses.objective import Objective",
    "import tf_outheads.trainingwheels",
    "from tf_outheads import models",
    "from . import training",
])
def test_forbidden_imports_passes_other_modules(source):
    assert forbidden_imports(source, ("tf_outheads.training",)) == []

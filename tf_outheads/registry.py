"""The names presets and run files give components: one `Registry` per kind.

A run configuration names its pieces (`model.head: joint`, `train.loss:
{class_name: vmf}`, `train.optimizer: lazy_adam`, `train.learning_rate_schedule:
{name: inverse_sqrt}`); a registry maps such a name to its class. A class is
registered where it is defined, once, with its kind's decorator:

    @register_loss("vmf")
    class VMFLoss(EmbeddingTargetLoss): ...

The kinds: `HEADS` (output layers), `LOSSES`, `OPTIMIZERS`,
`LEARNING_RATE_SCHEDULES`. Every consumer reads the registry (a configuration's
checks, the builders of a run's pieces, the listings of components, the conformance
tests), so a new component is its file and its registration. A user's own component
registers when its module is imported.

This module imports nothing from the library, so every floor may use it;
`import tf_outheads` imports every module that defines a built-in component, so
the registries list them all once the package is imported.
"""

import collections.abc
import dataclasses
import difflib
import inspect


@dataclasses.dataclass(frozen=True)
class Entry:
    """One registered name: its class and what the listings print about it.

    Attributes:
        name: str, the name configurations use.
        target: the class.
        description: str, one line (default: the class docstring's first line).
    """

    name: str
    target: type
    description: str


class Registry(collections.abc.Mapping):
    """Name → class for one kind of component; reads as a read-only dict.

    Args:
        kind: str, what the names are ("head", "loss"), for messages.
        setting: str, the configuration key that takes these names
            ("train.loss"), for messages.
    """

    def __init__(self, kind, setting):
        self.kind = kind
        self.setting = setting
        self._entries = {}

    def register(self, name, target=None, *, description=None):
        """Register the class `target` under `name`.

        Without `target`, a class decorator. Registering the same class again
        (a module imported twice) is allowed; another class under a taken name
        raises `ValueError` (`unregister` it first).
        """
        if target is None:
            return lambda cls: self.register(name, cls, description=description)
        if not isinstance(name, str) or not name:
            raise ValueError(f"A {self.kind} name must be a non-empty str. Received: "
                             f"name={name!r}")
        if not isinstance(target, type):
            raise ValueError(f"Register a {self.kind} class. Received: {name}={target!r}")
        old = self._entries.get(name)
        if old is not None and _label(old.target) != _label(target):
            raise ValueError(f"The {self.kind} name {name!r} is taken by "
                             f"{_label(old.target)}; unregister it before registering "
                             f"{_label(target)}.")
        if description is None:
            doc = inspect.getdoc(target)
            description = doc.strip().splitlines()[0] if doc else ""
        self._entries[name] = Entry(name, target, description)
        return target

    def unregister(self, name):
        """Remove `name` (tests that register a component for their own use)."""
        self._entries.pop(name, None)

    def entry(self, name, argument=None):
        """The `Entry` of `name`; `ValueError` naming the valid ones if there is none
        (and `argument`, the setting or argument that gave it: default `setting`)."""
        if name not in self._entries:
            raise ValueError(self.unknown(name, argument))
        return self._entries[name]

    def lookup(self, name, argument=None):
        """The class registered as `name`; `ValueError` naming the valid ones if none."""
        return self.entry(name, argument).target

    def unknown(self, name, argument=None):
        """The message for a name nobody registered: the valid ones, the closest."""
        argument = argument or self.setting
        names = sorted(self)
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else "."
        return (f"{argument}: unknown {self.kind} {name!r}{hint} Registered: "
                f"{', '.join(names)}. Received: {argument}={name!r}")

    def __getitem__(self, name):
        if name not in self:
            raise KeyError(name)
        return self.lookup(name)

    def __contains__(self, name):
        return name in self._entries

    def __iter__(self):
        return iter(list(self._entries))

    def __len__(self):
        return len(self._entries)

    def __repr__(self):
        return f"Registry({self.kind!r}: {', '.join(sorted(self._entries))})"


def _label(target):
    return f"{target.__module__}.{target.__qualname__}"


# Output layers (`model.head`): categorical and continuous heads.
HEADS = Registry("head", "model.head")
# Losses of the output layer by name (`train.loss: {class_name, config}`).
LOSSES = Registry("loss", "train.loss.class_name")
OPTIMIZERS = Registry("optimizer", "train.optimizer")
LEARNING_RATE_SCHEDULES = Registry("learning-rate schedule",
                                   "train.learning_rate_schedule.name")


def register_head(name, cls=None, *, description=None):
    """Register an output layer under `name` (a class decorator without `cls`)."""
    return HEADS.register(name, cls, description=description)


def register_loss(name, cls=None, *, description=None):
    """Register a loss of the output layer under `name` (`train.loss.class_name`)."""
    return LOSSES.register(name, cls, description=description)


def register_optimizer(name, cls=None, *, description=None):
    """Register an optimizer class under `name` (`train.optimizer`)."""
    return OPTIMIZERS.register(name, cls, description=description)


def register_schedule(name, cls=None, *, description=None):
    """Register a learning-rate schedule under `name` (`train.learning_rate_schedule`)."""
    return LEARNING_RATE_SCHEDULES.register(name, cls, description=description)

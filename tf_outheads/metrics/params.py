"""Parameter counts of a model, by part.

The papers compare output layers by their parameter count (a tied or joint head
adds few or none on top of the target embedding), so a count must see tied
weights once. Every variable is counted once, in the first group that lists it.
"""

import dataclasses
import math

OTHER_GROUP = "other"


@dataclasses.dataclass(frozen=True)
class ParameterReport:
    """Parameter counts of a model, by group.

    Args:
        groups: dict from group name to parameter count, in the model's order
            (e.g. `embeddings`, `encoder`, `decoder`, `output_layer`, then
            `other` when some weights belong to no group).
        trainable_groups: dict with the same keys, counting trainable
            parameters only.
        total: int, unique parameters of `model.weights` (trainable and
            non-trainable); equals `sum(groups.values())`.
        trainable: int, the trainable part of `total`.
        output_capacity: dict or `None`. The output layer's capacity as
            Pappas et al. (2018) count it (Eq. 8–10, 16), from the model's
            `head.output_capacity()`: `equation`, `terms`, `parameters`.
    """

    groups: dict
    trainable_groups: dict
    total: int
    trainable: int
    output_capacity: dict | None = None

    @property
    def non_trainable(self):
        """int, the non-trainable part of `total`."""
        return self.total - self.trainable

    def __str__(self):
        header = ("group", "parameters", "trainable", "share")
        rows = []
        for name, count in self.groups.items():
            share = 100.0 * count / self.total if self.total else 0.0
            rows.append(
                (
                    name,
                    f"{count:,}",
                    f"{self.trainable_groups[name]:,}",
                    f"{share:.1f}%",
                )
            )
        rows.append(("total", f"{self.total:,}", f"{self.trainable:,}", ""))
        widths = [
            max(len(row[column]) for row in [header] + rows)
            for column in range(len(header))
        ]

        def format_row(row):
            cells = [row[0].ljust(widths[0])]
            cells += [
                cell.rjust(width) for cell, width in zip(row[1:], widths[1:])
            ]
            return "  ".join(cells).rstrip()

        rule = "-" * len(format_row(header))
        lines = [format_row(header), rule]
        lines += [format_row(row) for row in rows[:-1]]
        lines += [rule, format_row(rows[-1])]
        if self.output_capacity:
            capacity = self.output_capacity
            terms = " + ".join(
                f"{name} {'×'.join(str(d) for d in shape)}" for name, shape in capacity["terms"]
            )
            lines.append(
                f"output-layer capacity ({capacity['equation']}): "
                f"{capacity['parameters']:,} = {terms or '0'}"
            )
        return "\n".join(lines)


def _size(variable):
    return math.prod(int(dim) for dim in variable.shape)


def _variable_path(variable):
    return getattr(variable, "path", None) or getattr(variable, "name", "?")


def parameter_report(model):
    """Counts a model's parameters by group, each variable once.

    If the model has a method `parameter_groups()` returning an ordered dict
    from group name to a list of variables, those groups are used: a variable
    is counted in the first group that lists it, so a weight tied between the
    target embedding and the output layer counts under the embedding only.
    Otherwise the groups are the model's top-level sub-layers (`model.layers`)
    that hold weights. Weights of `model.weights` listed in no group go to
    `"other"`.

    Args:
        model: a built `keras.Model` (or layer).

    Returns:
        `ParameterReport`; `str(report)` is a small table.

    Raises:
        ValueError: when the model is not built, or `parameter_groups()`
            lists a variable that is not one of `model.weights`.

    Example:

    ```python
    import keras
    from tf_outheads.metrics import parameter_report
    model = keras.Sequential(
        [keras.Input((4,)), keras.layers.Dense(8, name="hidden"),
         keras.layers.Dense(2, name="output_layer")]
    )
    report = parameter_report(model)
    report.groups  # {"hidden": 40, "output_layer": 18}
    print(report)
    ```
    """
    if not model.built:
        raise ValueError(
            "`model` must be built before its parameters are counted; call "
            f"it on a batch or call `build` first. Received: model={model.name}"
        )
    # Unique weights by identity; a Keras variable can also be named through
    # its backend value (`variable.value`), which maps to the same weight.
    weights = {}
    aliases = {}
    for variable in model.weights:
        if id(variable) not in aliases:
            weights[id(variable)] = variable
            aliases[id(variable)] = id(variable)
            value = getattr(variable, "value", None)
            if value is not None:
                aliases.setdefault(id(value), id(variable))
    trainable_ids = {
        aliases[id(variable)]
        for variable in model.trainable_weights
        if id(variable) in aliases
    }

    if callable(getattr(model, "parameter_groups", None)):
        named_groups = model.parameter_groups()
        strict = True
    else:
        named_groups = {
            layer.name: layer.weights for layer in model.layers if layer.weights
        }
        strict = False

    counted = set()
    groups = {}
    trainable_groups = {}

    def add(name, variable_ids):
        groups[name] = groups.get(name, 0)
        trainable_groups[name] = trainable_groups.get(name, 0)
        for variable_id in variable_ids:
            if variable_id in counted:
                continue
            counted.add(variable_id)
            size = _size(weights[variable_id])
            groups[name] += size
            if variable_id in trainable_ids:
                trainable_groups[name] += size

    for name, variables in named_groups.items():
        variable_ids = []
        for variable in variables:
            if id(variable) in aliases:
                variable_ids.append(aliases[id(variable)])
            elif strict:
                raise ValueError(
                    f"`parameter_groups()` group {name!r} lists the variable "
                    f"{_variable_path(variable)!r}, which is not one of "
                    "`model.weights`."
                )
            # In the fallback, a sub-layer's variable the model does not
            # track as a weight is not a parameter of the model.
        add(name, variable_ids)

    leftover = [
        variable_id for variable_id in weights if variable_id not in counted
    ]
    if leftover:
        add(OTHER_GROUP, leftover)

    total = sum(_size(variable) for variable in weights.values())
    trainable = sum(
        _size(weights[variable_id]) for variable_id in trainable_ids
    )
    assert total == sum(groups.values()), (
        f"Parameter groups sum to {sum(groups.values())} but the model has "
        f"{total} unique parameters."
    )
    head = getattr(model, "head", None)
    capacity = None
    if callable(getattr(head, "output_capacity", None)) and getattr(head, "built", False):
        capacity = head.output_capacity()
    return ParameterReport(
        groups=groups,
        trainable_groups=trainable_groups,
        total=total,
        trainable=trainable,
        output_capacity=capacity,
    )

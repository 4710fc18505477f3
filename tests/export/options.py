"""The `translate` signature's options as a loaded SavedModel's signature needs them:
every input named (a concrete signature has no defaults), "not set" for those not given:
each option's `RequestInput.not_set` (`-1`; NaN for `eos_bias`, whose negative values
are real biases), `""` for the prefix. Read from `DecodeOptions`, as the export does."""

import tensorflow as tf

from tf_outheads.decoding.options import DecodeOptions

DTYPES = {**{name: request.dtype for name, request in DecodeOptions.request_inputs()},
          "target_prefix": tf.string}
NOT_SET = {**{name: request.not_set for name, request in DecodeOptions.request_inputs()},
           "target_prefix": ""}


def signature_options(**given):
    """`{name: (None,) tensor}` for every option of the `translate` signature: a value
    given (one, or a list of one per source; a tensor is kept), else not set."""
    options = {}
    for name, dtype in DTYPES.items():
        value = given.pop(name, NOT_SET[name])
        if not isinstance(value, tf.Tensor):
            value = tf.constant(value if isinstance(value, (list, tuple)) else [value], dtype)
        options[name] = value
    if given:
        raise TypeError(f"not an option of the translate signature: {sorted(given)}")
    return options

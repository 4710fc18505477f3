"""The `translate` signature's options as a loaded SavedModel's signature needs them:
every input named (a concrete signature has no defaults), `-1` (`""` for the prefix)
for those not given."""

import tensorflow as tf

DTYPES = {"beam_size": tf.int32, "length_penalty": tf.float32, "num_hypotheses": tf.int32,
          "replace_unk": tf.int32, "sampling_topk": tf.int32, "sampling_topp": tf.float32,
          "sampling_temperature": tf.float32, "seed": tf.int64, "with_alignments": tf.int32,
          "target_prefix": tf.string}


def signature_options(**given):
    """`{name: (None,) tensor}` for every option of the `translate` signature: a value
    given (one, or a list of one per source; a tensor is kept), else `[-1]`."""
    options = {}
    for name, dtype in DTYPES.items():
        value = given.pop(name, "" if dtype == tf.string else -1)
        if not isinstance(value, tf.Tensor):
            value = tf.constant(value if isinstance(value, (list, tuple)) else [value], dtype)
        options[name] = value
    if given:
        raise TypeError(f"not an option of the translate signature: {sorted(given)}")
    return options

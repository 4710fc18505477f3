"""The `translate` signature's options as a loaded SavedModel's signature needs them:
every input named (a concrete signature has no defaults), "not set" for those not given:
`-1`, `""` for the prefix, NaN for `eos_bias` (whose negative values are real biases)."""

import tensorflow as tf

DTYPES = {"beam_size": tf.int32, "length_penalty": tf.float32, "num_hypotheses": tf.int32,
          "replace_unk": tf.int32, "sampling_topk": tf.int32, "sampling_topp": tf.float32,
          "sampling_temperature": tf.float32, "seed": tf.int64, "with_alignments": tf.int32,
          "eos_bias": tf.float32, "block_repeats": tf.int32, "target_prefix": tf.string}
NOT_SET = {"target_prefix": "", "eos_bias": float("nan")}


def signature_options(**given):
    """`{name: (None,) tensor}` for every option of the `translate` signature: a value
    given (one, or a list of one per source; a tensor is kept), else not set."""
    options = {}
    for name, dtype in DTYPES.items():
        value = given.pop(name, NOT_SET.get(name, -1))
        if not isinstance(value, tf.Tensor):
            value = tf.constant(value if isinstance(value, (list, tuple)) else [value], dtype)
        options[name] = value
    if given:
        raise TypeError(f"not an option of the translate signature: {sorted(given)}")
    return options

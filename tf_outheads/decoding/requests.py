"""Per-request decoding options in graph ops: the exported `translate` signature's inputs.

A request of the SavedModel (`tf_outheads.export.TranslatorModule`) sets any option that
has a `RequestInput` (`DecodeOptions.request_inputs()`): one `(None,)` tensor each,
holding one value for the whole request or one per source, a value that is `unset`
(`-1`; NaN for `eos_bias`) meaning "the export's default". `RequestOptions`, a part of
`tf_outheads.decoding.graph.TranslationGraph`, checks such a request once
(`check_options`, before anything is tokenized) and resolves it into one value per
row (`resolve_options`). Both are driven by the fields of the graph's `DecodeOptions`:
an option added there is an input of the signature, checked and resolved here, with
no list to edit.
"""

import tensorflow as tf

from tf_outheads.decoding.options import SAMPLING_OPTIONS


class RequestOptions:
    """The per-request options of a `TranslationGraph` (which sets `options`,
    `beam_sizes`, `sampling`, `can_replace_unk`, `can_sample` and `model`)."""

    def request_inputs(self):
        """`((name, RequestInput), ...)` of the graph's options (`DecodeOptions`)."""
        return type(self.options).request_inputs()

    def check_options(self, batch_size, options):
        """Asserts refusing the option values a request cannot use.

        Each raises `InvalidArgumentError` with a message naming the option
        and showing the values received: an option of neither one value nor
        one per source, a value its `RequestInput.valid` refuses (a NaN,
        infinite or > 10 `length_penalty`, an infinite `eos_bias` or one above
        100 in size, sampling options out of range), `replace_unk` or
        `with_alignments` > 0 when the model cannot align, and sampling with a
        head that has no distribution.
        """
        checks = []
        for name, request in self.request_inputs():
            value = options[name]
            size = tf.size(value)
            checks.append(tf.debugging.Assert(
                tf.logical_or(tf.equal(size, 1), tf.equal(size, batch_size)),
                [f"`{name}` must hold one value, or one per source. Received: {name} of "
                 "length", size, "for a batch of", batch_size], name=f"check_{name}_length"))
            if request.valid is not None:
                checks.append(tf.debugging.Assert(
                    tf.reduce_all(request.valid(value)),
                    [f"`{name}` must be {request.requirement}. Received: {name}=", value],
                    summarize=16, name=f"check_{name}"))
        if not self.can_replace_unk:
            for name in ("replace_unk", "with_alignments"):  # both read the attention
                checks.append(tf.debugging.Assert(
                    tf.reduce_all(options[name] <= 0),
                    [f"`{name}` is not available in this export (its model has no "
                     f"source_alignments): send 0 or -1. Received: {name}=", options[name]],
                    summarize=16, name=f"check_{name}"))
        if not self.can_sample:
            checks.append(tf.debugging.Assert(
                tf.logical_not(self._sampling_asked(options)),
                [sampling_refusal(self.model.head) + " Send -1."],
                name="check_sampling_available"))
        return checks

    def _sampling_asked(self, options, batch_size=None):
        """Whether each row sets a sampling option (`(batch_size,)`), or any (`()`)."""
        requests = dict(self.request_inputs())
        given = [tf.logical_not(requests[name].unset(options[name])) for name in SAMPLING_OPTIONS]
        if batch_size is None:
            return tf.reduce_any([tf.reduce_any(value) for value in given])
        return tf.reduce_any(tf.stack([tf.broadcast_to(value, [batch_size])
                                       for value in given]), axis=0)

    def check_sampling_widths(self, options):
        """An assert refusing a row that samples with a beam it asked for (resolved
        options: a row that samples and left `beam_size` unset decodes with width 1)."""
        wide = tf.logical_and(options["sampling"], options["beam_size"] > 1)
        return [tf.debugging.Assert(tf.logical_not(tf.reduce_any(wide)), [
            "Sampling draws one piece at a time: send beam_size 1 (or -1) with sampling "
            "options. Received: beam_size=", options["beam_size"]], summarize=16,
            name="check_sampling_beam_size")]

    def resolve_options(self, options, batch_size):
        """One value per row of every option: a single value broadcast, an `unset` one
        → the graph's (its `DecodeOptions`), a flag (a bool option) > 0 → on. Then
        each width is the largest of `beam_sizes` not above the request's, each n-best
        size is clipped to `[1, width]`; `sampling`: the rows that sample (a sampling
        option set, or the graph samples by default), with width 1 when their
        `beam_size` was left unset; an unset `seed` → the graph's, else one drawn at
        random for the request (every row gets its own from it, `row_seeds`)."""
        defaults = self.options.as_dict()
        sampling_defaults = self.sampling or {"topk": 0, "topp": 1.0, "temperature": 1.0}
        for name in SAMPLING_OPTIONS:
            defaults[name] = sampling_defaults[name[len("sampling_"):]]
        if defaults["seed"] is None:
            defaults["seed"] = tf.random.uniform([], 0, tf.int64.max, tf.int64)
        resolved = {}
        for name, request in self.request_inputs():
            value = tf.broadcast_to(options[name], [batch_size])
            default = defaults[name]
            value = tf.where(request.unset(value), tf.cast(default, value.dtype), value)
            resolved[name] = value > 0 if isinstance(default, bool) else value
        sampling = tf.logical_or(self._sampling_asked(options, batch_size),
                                 self.sampling is not None)
        # A row that samples and left its width unset decodes with width 1.
        unset = dict(self.request_inputs())["beam_size"].unset(
            tf.broadcast_to(options["beam_size"], [batch_size]))
        beam_size = tf.where(tf.logical_and(sampling, unset), 1, resolved["beam_size"])
        widths = tf.constant(self.beam_sizes, tf.int32)
        position = tf.reduce_sum(
            tf.cast(widths[tf.newaxis, :] <= beam_size[:, tf.newaxis], tf.int32), axis=1) - 1
        resolved["beam_size"] = tf.gather(widths, position)
        resolved["num_hypotheses"] = tf.clip_by_value(resolved["num_hypotheses"], 1,
                                                      resolved["beam_size"])
        resolved["sampling"] = sampling
        return resolved


def sampling_refusal(head):
    """Why a head cannot sample: its decoding scores are not log-probabilities."""
    scoring = getattr(head, "scoring", None)
    how = f" (scoring={scoring!r})" if scoring else ""
    return (f"Sampling needs a distribution over the vocabulary, and this model's head "
            f"{type(head).__name__}{how} scores pieces with something else: the "
            "`sampling_*` options are not available with it (a continuous head samples "
            "from its posterior: scoring='posterior').")


__all__ = ["RequestOptions", "sampling_refusal"]

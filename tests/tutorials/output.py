"""What the tutorial tests read from a tutorial's printed output."""


def section(out, marker):
    """The text from `marker` to the next `=== ` marker (or the end); fails if `marker`
    is missing."""
    assert marker in out, f"{marker!r} not in the tutorial's output"
    return out.split(marker, 1)[1].split("\n=== ", 1)[0]

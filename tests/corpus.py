"""Small real corpora for end-to-end tests: the first verses of each split of the
embedded Bible corpus, written in its own TSV format (header kept)."""

import gzip

from tf_outheads_zoo.presets import EMBEDDED_CORPUS


def write_corpus_slice(path, train, dev, test):
    """Write the first `train`/`dev`/`test` verses of the embedded corpus to `path`.

    Returns `str(path)`, a TSV that `--corpus` and `data.read_tsv` accept.
    """
    keep = {"train": train, "dev": dev, "test": test}
    rows = []
    with gzip.open(EMBEDDED_CORPUS, "rt", encoding="utf-8") as f:
        header = next(f)
        for line in f:
            split = line.split("\t")[1]
            if keep[split] > 0:
                keep[split] -= 1
                rows.append(line)
            if not any(keep.values()):
                break
    with open(path, "w", encoding="utf-8") as f:
        f.write(header + "".join(rows))
    return str(path)

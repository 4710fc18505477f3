"""Small real corpora for end-to-end tests: the first verses of each split of the
embedded Bible corpus, written in its own TSV format (header kept), or as text files."""

import gzip
import os

from tf_outheads.data import read_tsv
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


def write_text_files(corpus_tsv, directory):
    """Each split's es / en_web columns as `{split}.es` / `{split}.en` (train gzipped) and
    the test split's en_kjv as `test.kjv.en`; returns the directory."""
    os.makedirs(directory, exist_ok=True)
    for split in ("train", "dev", "test"):
        corpus = read_tsv(corpus_tsv, split=split)
        target = os.path.join(directory, f"{split}.en" + (".gz" if split == "train" else ""))
        with open(os.path.join(directory, f"{split}.es"), "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in corpus.sources))
        with (gzip.open if target.endswith(".gz") else open)(target, "wt", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in corpus.targets))
        if split == "test":
            with open(os.path.join(directory, "test.kjv.en"), "w", encoding="utf-8") as f:
                f.write("".join(t + "\n" for t in corpus.references["en_kjv"]))
    return directory


def text_data(directory):
    """`{"train", "dev", "test"}` settings (`data.train` ...) of `write_text_files`' files."""
    return {"train": {"source": f"{directory}/train.es", "target": f"{directory}/train.en.gz"},
            "dev": {"source": f"{directory}/dev.es", "target": f"{directory}/dev.en"},
            "test": {"source": f"{directory}/test.es", "target": f"{directory}/test.en",
                     "references": [f"{directory}/test.kjv.en"]}}


def lengthen_line(path, index):
    """Append a word to line `index` of the text file `path`: the same line count, another
    size, and every later line at another byte position (a corpus edited in place)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    lines[index] += " otra"
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))

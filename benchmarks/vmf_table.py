"""The vMF target table's hubness under each post-processing option (issue 41).

A continuous-output decoder outputs the target row nearest to its predicted
vector; rows that are the nearest neighbours of very many points (*hubs*) are
output far too often (the Kumar study's vMF runs: "Thus" 723 times in 1,068 dev
verses). This script builds the table the way a `lstm-cpu-vmf` run does (the
preset's own target SentencePiece model on the embedded corpus's training split,
300-d vectors trained on its target side with the preset's seed, `</s>` appended
to every verse so that the `file` EOS exists), once per
vector model of `--models` (fastText with character n-grams, word2vec without),
then lays it out with each post-processing variant of `--variants`:

- `plain`: L2-normalised rows (the tables of every run before issue 41);
- `center`: the vocabulary's mean subtracted, rows renormalised;
- `abtt<D>`: centred, then the top D principal components removed
  ("all-but-the-top", Mu & Viswanath 2018; D ≈ dim / 100 = 3 for 300-d).

For each table: the skewness of the 10-occurrence of its rows (each row a query,
leaving itself out; `tf_outheads.metrics.hubness`), the share of rows that are
nobody's neighbour, the most frequent neighbours, and the largest cosine of each
`</s>` choice (`far`, `file`: the vectors' own `</s>`, `negative_period`) with a
piece's row: an EOS close to a piece is the "clause break becomes a sentence end"
failure. `benchmarks/vmf.py --table` runs the same as its part (c).

    python benchmarks/vmf_table.py               # the lstm-cpu-vmf table (~3-5 min)
    python benchmarks/vmf_table.py --quick       # tiny sizes, a smoke test

Results go to `--output` (JSON, default benchmarks/results/vmf_table.json).
"""

import argparse
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

QUICK = {"sentences": 1500, "vocab_size": 400, "dim": 16, "epochs": 1}
VARIANTS = ("plain", "center", "abtt3")
EOS_CHOICES = ("far", "file", "negative_period")


def add_table_arguments(parser, prefix=""):
    """The options of the table part (`prefix`: "table-" inside vmf.py)."""
    dash = f"--{prefix}"
    parser.add_argument(f"{dash}preset", default="lstm-cpu-vmf",
                        help="preset whose tokenizer and vector settings are used")
    parser.add_argument(f"{dash}sentences", type=int, default=0,
                        help="training verses for the vectors and tokenizer (0: all)")
    parser.add_argument(f"{dash}vocab-size", type=int, default=0,
                        help="target vocabulary (0: the preset's)")
    parser.add_argument(f"{dash}dim", type=int, default=0, help="vector size (0: the preset's)")
    parser.add_argument(f"{dash}epochs", type=int, default=0,
                        help="vector training passes (0: the preset's)")
    parser.add_argument(f"{dash}models", default="fasttext,word2vec",
                        help="vector models compared")
    parser.add_argument(f"{dash}variants", default=",".join(VARIANTS),
                        help="post-processing variants: plain, center, abtt<D>")
    parser.add_argument(f"{dash}k", type=int, default=10, help="neighbours per query")


def variant_options(name):
    """`{center, remove_components}` of a variant name."""
    if name == "plain":
        return {"center": False, "remove_components": 0}
    if name == "center":
        return {"center": True, "remove_components": 0}
    if name.startswith("abtt") and name[4:].isdigit() and int(name[4:]) > 0:
        return {"center": True, "remove_components": int(name[4:])}
    raise SystemExit(f"vmf_table: unknown variant {name!r}; expected plain, center or abtt<D>")


def run_table(options, log=print):
    """The table part: `{"settings", "rows"}`; `options` has the attributes of
    `add_table_arguments` (without prefix)."""
    import numpy as np

    from tf_outheads import data
    from tf_outheads.metrics import hubness
    from tf_outheads_zoo.presets import preset_config
    from tf_outheads_zoo.splits import read_split

    config = preset_config(options.preset)
    vector_config = config.data.target_vectors or {}
    dim = options.dim or vector_config.get("dim", 300)
    epochs = options.epochs or vector_config.get("epochs", 5)
    vocab_size = options.vocab_size or config.data.vocab_size
    seed = config.train.seed
    train = read_split(config.data, "train", log=lambda *_: None)
    if options.sentences:
        train = train.select(range(min(options.sentences, len(train))))
    cache = HERE / ".cache" / f"vmf_table_{options.preset}_{vocab_size}_{len(train)}"
    _, tokenizer = data.build_tokenizers(
        train.sources, train.targets, cache, vocab_size=vocab_size,
        joint=config.data.joint_vocabulary, model_type=config.data.tokenizer_type,
        seed=seed)
    rows = []
    for model in options.models.split(","):
        path = cache / f"vectors_{model}_{dim}_{epochs}.vec"
        started = time.perf_counter()
        if not path.exists():
            data.train_word_vectors(train.targets, tokenizer, path, dim=dim, epochs=epochs,
                                    seed=seed, model=model, eos_token="</s>")
        vector_seconds = time.perf_counter() - started
        words, vectors = data.load_word_vectors(path)
        for variant in options.variants.split(","):
            settings = variant_options(variant)
            eos_cosines = {}
            for eos in EOS_CHOICES:
                table = data.target_embedding_table(tokenizer, words, vectors, seed=seed,
                                                    eos=eos, **settings)
                own = table.vectors[table.has_vector]
                eos_cosines[eos] = float(np.max(own @ table.vectors[data.EOS_ID]))
            # The rows with a vector are the same whatever the </s>: the last table serves.
            ids = np.flatnonzero(table.has_vector)
            result = hubness(table.vectors[ids], k=options.k)
            summary = result.as_dict(names=lambda i: tokenizer.id_to_piece(int(ids[i])))
            row = {"model": model, "variant": variant, **settings,
                   "pieces_with_vector": int(len(ids)), "vector_seconds": vector_seconds,
                   "hubness": summary, "eos_largest_cosine": eos_cosines}
            rows.append(row)
            log(f"{model:<9} {variant:<7} skew {summary['skewness']:6.2f}  anti-hubs "
                f"{summary['anti_hub_fraction']:6.1%}  hubs "
                + ", ".join(f"{piece} {count}" for piece, count in summary["top"][:4]))
    return {"settings": {"preset": options.preset, "vocab_size": vocab_size,
                         "pieces": tokenizer.vocab_size, "sentences": len(train), "dim": dim,
                         "epochs": epochs, "seed": seed, "k": options.k},
            "rows": rows}


def print_table(record):
    print(f"\n=== TARGET TABLE HUBNESS (k = {record['settings']['k']}; "
          f"{record['settings']['pieces']} pieces, dim {record['settings']['dim']}, "
          f"{record['settings']['sentences']} verses) ===")
    print(f"{'vectors':<9} {'rows':<7} {'skewness':>8} {'anti-hubs':>9} {'hubs>=2k':>8}  "
          f"{'max cos </s>: far / file / -period':<36} top neighbours")
    for row in record["rows"]:
        summary, eos = row["hubness"], row["eos_largest_cosine"]
        print(f"{row['model']:<9} {row['variant']:<7} {summary['skewness']:>8.2f} "
              f"{summary['anti_hub_fraction']:>9.1%} {summary['hub_fraction']:>8.1%}  "
              f"{eos['far']:>10.3f} {eos['file']:>7.3f} {eos['negative_period']:>7.3f}"
              f"{'':<11} " + ", ".join(f"{p} {c}" for p, c in summary["top"][:5]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_table_arguments(parser)
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes: {QUICK}")
    parser.add_argument("--output", default=str(HERE / "results" / "vmf_table.json"))
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            if not getattr(args, key):
                setattr(args, key, value)
    started = time.perf_counter()
    record = run_table(args)
    print_table(record)
    record = {"benchmark": "vmf_table", "quick": args.quick, **record,
              "wall_seconds": time.perf_counter() - started}
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1, ensure_ascii=False)
    print(f"wrote {args.output}")
    return record


if __name__ == "__main__":
    main()

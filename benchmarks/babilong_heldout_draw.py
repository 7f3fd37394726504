"""Draw rows of a model's BABILong prediction files for judging `acc_corrected` blind (the held-out table).

Prints CSV rows in the columns of `tests/babilong/fixtures/corrected_judged_heldout.csv` without
`verdict` and `reason`, which the reader fills from question, target and output alone (the checks'
verdicts are not printed). Three samples per model, each uniform with a seeded `random.Random`
over the model's files (sorted by name) and rows (in file order):

* `changed` (seed "29-NAME"): `--changed` rows where `acc_corrected` changes `acc`'s verdict
  under the rules of today (all of them when there are fewer);
* `acc_fails_naming_target` (seed "29b-NAME"): `--naming` rows `acc` fails whose output names the
  target (the label or one of its forms; for qa19 a compass step; every yes/no answer): every
  answer a reader credits and `acc` fails is one of these;
* `acc_fails` (seed "29-NAME"): `--fails` rows from every row `acc` fails (a cross-check).

`--more-changed N --exclude TABLE` extends the `changed` sample of a model already in TABLE by N
rows drawn (seed "33-NAME") from its changes not yet in TABLE's `changed` rows: a uniform sample of
the changes of today stays uniform when more are drawn from the rest (rows whose change a later
rule removed leave the sample as they leave the set). Files without a question column (which no
check can read) are left out, each named.

    python benchmarks/babilong_heldout_draw.py ../shared/data/babilong_predictions_heldout/mistralai/Mistral-7B-Instruct-v0.2-qa1 \
        Mistral-7B-Instruct-v0.2-qa1 > rows.csv
    git show add2778^:tests/babilong/fixtures/corrected_judged_heldout.csv > before.csv   # the table before issue 33
    python benchmarks/babilong_heldout_draw.py ../shared/data/babilong_predictions_dev/01-ai/Yi-34B-200k Yi-34B-200k \
        --changed 0 --naming 0 --fails 0 --more-changed 40 --exclude before.csv

The first draws the rows the table holds for that model; the second the 40 changes issue 33 added for a
file model of the first draw (against the table of today it would draw 40 others). The first draw of those
four models ran under older rules, so `--changed 40` today draws other rows for them than the table holds.
The figures: `python tests/babilong/test_judged.py`.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import sys
from pathlib import Path

from lm_eval_longmem.babilong.corrected_check import COMPASS, _apply_forms, check, normalize_answer
from lm_eval_longmem.babilong.official_check import labels_for
from lm_eval_longmem.babilong.predictions import read_predictions

COLUMNS = ("model", "task", "source", "row", "sample", "question", "target", "output")
YES_NO = {"qa6", "qa9", "qa10", "qa17", "qa18"}


def names_target(qa: str, target: str, output: str) -> bool:
    """Whether `output` names `target` at all: the label or a form of it as a whole word (each item of a list
    target), a compass step for qa19, any answer to a yes/no question."""
    if qa in YES_NO:
        return True
    text = normalize_answer(output)
    words = set(re.findall(r"\w+", text))
    if qa == "qa19":
        return bool(words & COMPASS.keys())
    items = [item.strip().lower() for item in target.split(",")]
    text = _apply_forms(text, tuple(sorted({label.lower() for label in labels_for(qa)})))
    return all(re.search(rf"(?<!\w){re.escape(item)}(?!\w)", text) for item in items)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the model's folder of prediction CSVs (qaN_... .csv)")
    parser.add_argument("name", help="the model's name in the table (and in the seeds)")
    parser.add_argument("--changed", type=int, default=40)
    parser.add_argument("--naming", type=int, default=25)
    parser.add_argument("--fails", type=int, default=30)
    parser.add_argument("--more-changed", type=int, default=0)
    parser.add_argument("--exclude", type=Path, help="a judged table whose rows of this model are not drawn again")
    parser.add_argument("--data-root", type=Path, help="what `source` is relative to (default: the folder's data root)")
    args = parser.parse_args()
    root = args.data_root or next(p for p in args.folder.resolve().parents if p.name == "data")
    taken: set[tuple[str, int]] = set()
    if args.exclude:
        with open(args.exclude, newline="", encoding="utf-8") as fh:
            taken = {
                (r["source"], int(r["row"]))
                for r in csv.DictReader(fh)
                if r["model"] == args.name and r["sample"] == "changed"
            }
    changed, naming, fails = [], [], []
    for path in sorted(args.folder.glob("qa*.csv")):
        qa = re.match(r"qa\d+", path.name)[0]  # type: ignore[index]
        source = str(path.resolve().relative_to(root))
        with open(path, newline="", encoding="utf-8") as fh:
            if "question" not in next(csv.reader(fh), []):
                print(f"{source}: no question column, left out", file=sys.stderr)
                continue
        for i, row in enumerate(read_predictions(path)):
            item = {"model": args.name, "task": qa, "source": source, "row": i, "question": row["question"].strip(),
                    "target": row["target"], "output": row["output"]}  # fmt: skip
            verdict = check(qa, row["target"], row["output"], row["question"])
            if verdict.acc != verdict.acc_corrected:
                changed.append(item)
            if not verdict.acc:
                fails.append(item)
                if names_target(qa, row["target"], row["output"]):
                    naming.append(item)
    draws = [
        ("changed", changed, args.changed, f"29-{args.name}"),
        ("acc_fails_naming_target", naming, args.naming, f"29b-{args.name}"),
        ("acc_fails", fails, args.fails, f"29-{args.name}"),
        ("changed", [r for r in changed if (r["source"], r["row"]) not in taken], args.more_changed, f"33-{args.name}"),
    ]
    writer = csv.DictWriter(sys.stdout, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for sample, population, size, seed in draws:
        for item in random.Random(seed).sample(population, min(size, len(population))):
            writer.writerow({**item, "sample": sample})
        print(f"{args.name} {sample}: {min(size, len(population))} of {len(population)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

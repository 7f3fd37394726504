"""`python -m lm_eval_longmem.paths`: the task folder of every registered evaluation, one per line (see `paths`)."""

from __future__ import annotations

import sys

from lm_eval_longmem.common.evaluations import task_folders


def main() -> None:
    folders = task_folders()
    print("\n".join(map(str, folders)))
    if len(folders) > 1:
        print(
            f"lm-eval-longmem: {len(folders)} task folders (other packages' evaluations beside ours), one per line; "
            "lm_eval's --include_path takes one: run `lm-eval-longmem run` with lm_eval's flags to index them all",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()

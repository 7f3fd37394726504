"""The commands of the console script beyond `run`, `plot`, `report`, `plan` and `shard`'s wiring in `cli.py`:
the demo (`demo.py`), merging shards (`merge.py`), each evaluation's own subcommands (`<evaluation>.py`,
named by its entry of `common/evaluations.py`) and the fine-tuning run (`booksort_finetune.py`).
"""

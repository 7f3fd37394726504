"""The commands of the console script beyond `run`, `plot`, `report`, `plan` and `shard`'s wiring in `cli.py`:
the demo (`demo.py`) and merging shards (`merge.py`). Each evaluation's own subcommands are in its rim
(`<evaluation>/rim/commands.py`), added through its registry entry (`common/evaluations.py`).
"""

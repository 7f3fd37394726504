"""BABILong (Kuratov et al., 2024): bAbI facts hidden in long text, at every length in one run.

One module per concern: `data` (which (task, length) runs; hub sets), `generate` (fresh samples in
the model's tokenizer) with `babi` (bAbI reader), `prompts` (the paper's layout, texts from the
harness), `metrics` (the authors' answer check and the corrected one), `task` (the lm-eval task
class), `configs` (writes task_configs/babilong/), `report` and `cli` (results and rescoring).
User documentation: task_configs/babilong/README.md.
"""

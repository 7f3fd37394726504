"""BABILong (Kuratov et al., 2024): bAbI facts hidden in long text, at every length in one run.

One module per concern: `data` (which (task, length) runs; hub sets), `generate` (fresh samples in
the model's tokenizer) with `babi` (bAbI reader), `prompts` (the paper's layout, texts from the
harness), `metrics` (the authors' answer check and the corrected one), `task` (the lm-eval task
class), `configs` (writes task_configs/babilong/), `summary` (cells, means over tasks, effective
context). Its results reader, report section, figures and commands (rescoring, the text report) are in
readers/babilong.py, report/babilong.py, plots/ and commands/babilong.py (`common/evaluations.py`).
User documentation: task_configs/babilong/README.md.
"""

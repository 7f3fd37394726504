"""BABILong (Kuratov et al., 2024): bAbI facts hidden in long text, at every length in one run.

One module per concern: `data` (which (task, length) runs; hub sets), `generate` (fresh samples in
the model's tokenizer) with `babi` (bAbI reader), `prompts` (the paper's layout, texts from the
harness), `official_check` and `corrected/` (the authors' answer check and the corrected
one), `predictions` (the authors' prediction files: scoring, audit), `simulate` with
`simulate_world` (fresh bAbI stories; `verify` checks them), `task` (the lm-eval task class),
`scores` (its score names), `summary` (cells, means over tasks, effective context). Its results reader,
report section, figures, commands (rescoring, the audit, the text report), planner and demo part are in
its rim (`rim/`, registered as `rim.EVALUATION`).
User documentation: task_configs/babilong/README.md.
"""

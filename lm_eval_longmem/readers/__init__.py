"""Everything that reads results files back: lm_eval's results and samples files (`results.py`), and per
evaluation what its tasks stored (`forgetting_curve.py`, `booksort.py`, `babilong.py`; the fine-tuning
command's summary, `booksort_finetune.py`). Readers show stored values; they never run a model. They sit
above the evaluations, which never import them.
"""

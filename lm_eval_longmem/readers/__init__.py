"""The reader of lm_eval's results and samples files (`results.py`): runs, their tasks' metrics and facts,
and which evaluation and condition each task is. What one evaluation's tasks stored is read by its own
reader (`<evaluation>/rim/reader.py`). Readers show stored values; they never run a model.
"""

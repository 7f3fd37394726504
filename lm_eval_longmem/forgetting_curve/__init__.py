"""Liu et al.'s forgetting curve: options (options.py), data (data.py), the lm-eval task (task.py), its scores
(scores.py), statistics (analysis.py); its reader, report section, figures, commands, planner and demo part
are in its rim (`rim/`, registered as `rim.EVALUATION`)."""

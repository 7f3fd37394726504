"""Liu et al.'s forgetting curve: data (data.py), the lm-eval task (task.py), statistics (analysis.py); its readers, figures,
report and commands are in readers/, plots/, report/ and commands/ (`common/evaluations.py`)."""

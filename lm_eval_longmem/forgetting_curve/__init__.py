"""Liu et al.'s forgetting curve: data (data.py), the lm-eval task (task.py), statistics (analysis.py), CLI (cli.py)."""

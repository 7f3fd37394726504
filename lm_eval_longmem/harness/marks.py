"""The mark on every function the harness layer installs in lm_eval, so that installing twice is a no-op."""

MARK = "_lm_eval_longmem"
"""Attribute set on every function we install (and, holding its state, on a TaskManager that indexed our tasks)."""

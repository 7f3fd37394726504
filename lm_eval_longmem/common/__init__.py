"""Pieces the three evaluations share: lengths, model facts, text sources, statistics, caching, the task base."""

class UsageError(ValueError):
    """A user mistake: one line naming the key or file and the fix."""

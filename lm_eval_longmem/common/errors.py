"""The one exception type for user mistakes."""


class UsageError(ValueError):
    """A user mistake: one line naming the key or file and the fix."""

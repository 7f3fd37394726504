"""Errors the package raises for its users (as opposed to its own bugs)."""


class UsageError(ValueError):
    """A user mistake: one line naming the key or file and the fix."""

"""The one exception type the CLI and the app turn into a one-line message."""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix (bad input, missing tool). Shown as one line, no traceback."""

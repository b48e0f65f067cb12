"""The one exception type the CLI and the app turn into a one-line message."""

# Loaded before `gpuscope run` starts its program: no `from __future__ import annotations`, which
# imports __future__ (~0.5 ms there); annotations naming what only type checkers import are strings.


class UserError(Exception):
    """A problem the user can fix (bad input, missing tool). Shown as one line, no traceback."""

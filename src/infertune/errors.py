"""Errors that reach the user as one line.

`UserError` means the input was wrong (exit code 2); anything else escaping the CLI is a bug (exit 1).
"""


class UserError(Exception):
    """Bad input: a file, a flag, a model that does not exist. The message is shown as is, on one line."""

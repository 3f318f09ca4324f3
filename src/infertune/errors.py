"""Errors that reach the user as one line.

`UserError` means the input was wrong (exit code 2); anything else escaping the CLI is a bug (exit 1).
"""


class UserError(Exception):
    """Bad input: a file, a flag, a model that does not exist. The message is shown as is, on one line."""


def validation_message(err, source: str) -> str:
    """One line naming the first invalid field of a pydantic ValidationError."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(root)"
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    return f"{source}: field '{loc}': {first['msg'].removeprefix('Value error, ')}{more}"


def validated(model_cls, data: dict, source: str, overrides: dict):
    """`model_cls` from file fields with CLI flags on top (None flags left out); bad input is a UserError."""
    from pydantic import ValidationError

    merged = {**data, **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return model_cls.model_validate(merged)
    except ValidationError as e:
        raise UserError(validation_message(e, source)) from None

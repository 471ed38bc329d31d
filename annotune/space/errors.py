"""What a space refuses: an invalid parameter or constraint, or a space too large to enumerate."""

from __future__ import annotations


class SpaceError(ValueError):
    """An invalid parameter or constraint, or a space that cannot do what was asked.

    `param` names the offending parameter; `constraint` is the index of the offending constraint
    and `offset` the character offset in its text, so the front end can point at the source.
    """

    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        constraint: int | None = None,
        offset: int | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.param = param
        self.constraint = constraint
        self.offset = offset


class SpaceTooLarge(SpaceError):
    """The space is too large to enumerate; sample it instead."""

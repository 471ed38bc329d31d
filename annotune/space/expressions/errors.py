"""A mistake in a text at an offset into it: the expression grammar's error, and the shape every
grammar's error has.

The annotation grammar (`annotune.annotate.grammar`) reads its numbers by this one's rules and
has its own error, `GrammarError`; both are a `TextError`, so that neither copies the other and a
caller turns either into FILE:LINE:COL alike.
"""

from __future__ import annotations


class TextError(ValueError):
    """A mistake `offset` characters (0-based) into the text a grammar was given."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.message = message
        self.offset = offset


class ExpressionError(TextError):
    """A constraint that cannot be parsed or evaluated.

    `offset` is the 0-based character offset of the offending token in the expression text, so
    the caller can point at FILE:LINE:COL.
    """

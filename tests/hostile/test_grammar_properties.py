"""Random bytes and random token streams against the annotation grammar and the constraint
parser: each gives a result or its own located error (an offset inside the input), never another
exception, never a hang (hypothesis's deadline)."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from annotune.annotate.grammar import (
    GrammarError,
    find_tune_comments,
    parse_domain,
    parse_number,
    parse_param_pragma,
)
from annotune.space.expressions import ExpressionError, evaluate, parse_expression

EXAMPLES = settings(max_examples=300, deadline=1000)  # ms: a few ms each, on a slow machine

NUMBERS = [
    "0", "1", "32", "-4", "+7", "010", "08", "0x1F", "0x", "1.5", ".5", "1e3", "1e", "1e400",
    "1.5f", "32u", "5f", "1_0", "12abc", "1.5.2", "9" * 25, "9" * 5000, "9223372036854775808",
    "0" * 30,
    "\u0663", "\uff13", "\u00b2", "nan", "inf",
]  # fmt: skip
PUNCTUATION = ["(", ")", ",", ":", "@tune", "@tune(", ";", '"', "\u00a0", "*/"]
KEYWORDS = ["values", "range", "pow2", "bool", "default", "N", "_x1", "\u00e9"]
OPERATORS = [
    "+", "-", "*", "/", "%", "<<", ">>", "<", "<=", ">", ">=", "==", "!=", "&", "^", "|",
    "&&", "||", "!", "~", "?", ":", "(", ")", ",", "=", "+=", "++", ".", "->", "[", "]", "'",
]  # fmt: skip
NAMES = ["a", "b", "min", "max", "true", "false", "os", "__import__"]
SPACES = st.sampled_from(["", " ", "  ", "\t", "\n", "\\\n"])


def streams(tokens: list[str], max_size: int) -> st.SearchStrategy[str]:
    """Tokens of the language, joined by random (or no) whitespace."""
    token = st.tuples(st.sampled_from(tokens), SPACES).map("".join)
    return st.lists(token, max_size=max_size).map("".join)


def texts(max_size: int) -> st.SearchStrategy[str]:
    """Random bytes as the front end would hand them over, and random Unicode text."""
    return st.one_of(
        st.binary(max_size=max_size).map(lambda data: data.decode("utf-8", errors="replace")),
        st.text(max_size=max_size),
    )


ANNOTATION_TOKENS = NUMBERS + PUNCTUATION + KEYWORDS
DOMAINS = st.tuples(
    st.sampled_from(["values", "range", "pow2", "bool", "default"]),
    st.lists(st.sampled_from(NUMBERS), max_size=4).map(", ".join),
    st.sampled_from(["(", "", " ("]),
    st.sampled_from([")", "", ",)", ") x"]),
).map(lambda parts: f"{parts[0]}{parts[2]}{parts[1]}{parts[3]}")
"""Nearly well-formed domains, where the numbers' mistakes are the ones found."""
ANNOTATIONS = st.one_of(texts(60), streams(ANNOTATION_TOKENS, 14), DOMAINS)
NESTED = st.integers(0, 400).flatmap(
    lambda depth: streams(NUMBERS + OPERATORS + NAMES, 8).map(
        lambda inner: "(" * depth + inner + ")" * depth
    )
)


def located(error: GrammarError | ExpressionError, text: str) -> bool:
    return 0 <= error.offset <= len(text)


@EXAMPLES
@given(body=ANNOTATIONS)
@example(body="values(1, \u0663)")  # Python's int() reads it as 3
def test_a_tune_comment_parses_or_is_a_located_error(body: str) -> None:
    comment = "// @tune " + body
    try:
        for annotation in find_tune_comments(comment):
            assert annotation.domain.values and annotation.domain.text.isascii()
            assert 0 <= annotation.offset <= annotation.domain_offset <= len(comment)
    except GrammarError as error:
        assert located(error, comment), (comment, error.offset)


@EXAMPLES
@given(body=ANNOTATIONS)
@example(body="values(\uff13) default(" + "9" * 5000 + ")")
def test_a_param_pragma_parses_or_is_a_located_error(body: str) -> None:
    for text in (body, "P " + body):
        try:
            pragma = parse_param_pragma(text)
        except GrammarError as error:
            assert located(error, text), (text, error.offset)
        else:
            assert pragma.domain.text.isascii()
            assert pragma.default is None or isinstance(pragma.default, int | float)


@EXAMPLES
@given(text=st.one_of(texts(30), streams(NUMBERS + ["+", "-", "u", "e"], 3)))
@example(text="9" * 5000)  # over int()'s 4300 digits
def test_a_number_is_a_c_constant_or_a_located_error(text: str) -> None:
    try:
        value = parse_number(text)
    except GrammarError as error:
        assert located(error, text), (text, error.offset)
    else:
        assert text.isascii() and type(value) in (int, float)
        assert -(2**63) < value < 2**63 if isinstance(value, int) else np.isfinite(value)


@EXAMPLES
@given(text=ANNOTATIONS)
@example(text="range(1, \u0663)")
def test_a_domain_parses_or_is_a_located_error(text: str) -> None:
    try:
        domain = parse_domain(text)
    except GrammarError as error:
        assert located(error, text), (text, error.offset)
    else:
        assert len(set(domain.values)) == len(domain.values) and domain.text.isascii()


@EXAMPLES
@given(text=st.one_of(texts(60), streams(NUMBERS + OPERATORS + NAMES, 20), NESTED))
@example(text="a > " + "9" * 5000)
def test_a_constraint_parses_and_evaluates_or_is_a_located_error(text: str) -> None:
    try:
        expr = parse_expression(text, {"a", "b"})
    except ExpressionError as error:
        assert located(error, text), (text, error.offset)
        return
    columns = {"a": np.array([-(2**63), -1, 0, 7, 2**62]), "b": np.array([0, 1, -1, 63, 64])}
    values = evaluate(expr, columns)
    assert values.shape == (5,) and values.dtype in (np.int64, np.float64)

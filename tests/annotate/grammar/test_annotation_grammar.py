import time

import pytest

from annotune.annotate.grammar import (
    GrammarError,
    find_tune_comments,
    parse_domain,
    parse_number,
    parse_param_pragma,
)
from annotune.annotate.grammar import annotation as grammar


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("values(8, 16, 32)", (8, 16, 32)),
        ("values(-1, 0x10, 2.5)", (-1, 16, 2.5)),
        ("range(1, 5)", (1, 2, 3, 4, 5)),
        ("range(0, 10, 4)", (0, 4, 8)),
        ("pow2(8, 256)", (8, 16, 32, 64, 128, 256)),
        ("pow2(3, 20)", (4, 8, 16)),
        ("bool", (0, 1)),
    ],
)
def test_domains(text, values):
    domain = parse_domain(text)
    assert domain.values == values
    assert domain.text == text


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ("values()", 0, "empty domain"),
        ("values(1, 2, 1)", 13, "duplicate value 1"),
        ("range(5, 1)", 6, "lo > hi"),
        ("range(1, 5, 0)", 12, "step must be positive"),
        ("range(1.5, 4)", 6, "integers"),
        ("pow2(0, 8)", 5, "at least 1"),
        ("pow2(5, 7)", 8, "no power of two"),
        ("between(1, 2)", 0, "unknown domain 'between'"),
        ("values(1, 2", 11, "expected ',' or ')'"),
        ("values(a)", 7, "expected a number"),
        ("bool extra", 5, "unexpected 'extra'"),
        ("values(1; 2)", 8, "unexpected character ';'"),
    ],
)
def test_domain_errors_point_at_the_mistake(text, offset, message):
    with pytest.raises(GrammarError) as caught:
        parse_domain(text)
    assert message in caught.value.message
    assert caught.value.offset == offset


def test_tune_comment_on_a_define():
    (annotation,) = find_tune_comments("// @tune values(1, 2)")
    assert annotation.name is None and annotation.clause is None
    assert annotation.domain.values == (1, 2)
    assert annotation.offset == 3 and annotation.domain_offset == 9


def test_tune_comment_naming_a_literal_and_its_clause():
    (annotation,) = find_tune_comments("/* @tune(VL: vector_length) pow2(32, 128) */")
    assert (annotation.name, annotation.clause) == ("VL", "vector_length")
    assert annotation.domain.values == (32, 64, 128)


def test_two_annotations_in_one_comment():
    found = find_tune_comments("/* @tune(G: num_gangs) values(1, 2) @tune(W: num_workers) bool */")
    assert [a.name for a in found] == ["G", "W"]


@pytest.mark.parametrize(
    ("comment", "message"),
    [
        ("// @tune(1x) bool", "expected a parameter name"),
        ("// @tune(A bool", "unclosed"),
        ("// @tune", "expected a domain"),
    ],
)
def test_tune_comment_errors(comment, message):
    with pytest.raises(GrammarError, match=message.replace("(", r"\(")):
        find_tune_comments(comment)


def test_param_pragma_with_default():
    pragma = parse_param_pragma("TILE range(1, 9, 2) default(3)")
    assert pragma.name == "TILE"
    assert pragma.domain.values == (1, 3, 5, 7, 9)
    assert pragma.default == 3
    assert pragma.default_offset == len("TILE range(1, 9, 2) default(")


def test_param_pragma_without_name():
    with pytest.raises(GrammarError, match="parameter name"):
        parse_param_pragma("values(1, 2)")


@pytest.mark.parametrize(
    ("text", "value"),
    [("42", 42), ("42u", 42), ("0x1F", 31), ("-3", -3), ("2.5f", 2.5), ("1e3", 1000.0)],
)
def test_numbers(text, value):
    assert parse_number(text) == value
    assert type(parse_number(text)) is type(value)


@pytest.mark.parametrize(
    ("text", "value"),
    [("010", 8), ("-010", -8), ("0777u", 511)],
)
def test_a_leading_zero_is_octal_as_in_c(text, value):
    """`#define TILE 010` is 8 to the compiler, so it must be 8 to annotune too."""
    assert parse_number(text) == value
    assert type(parse_number(text)) is type(value)


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ("1_0", 1, "invalid suffix '_0' on constant '1'"),
        ("\u0663", 0, "expected a number"),
        ("1\uff13", 1, "unexpected '３' after the constant '1'"),
        ("nan", 0, "expected a number"),
        ("-inf", 1, "expected a number"),
        ("5f", 1, "invalid suffix 'f' on constant '5'"),
        ("08", 0, "invalid digit in octal constant '08'"),
        ("1e400", 0, "floating constant '1e400' is out of range"),
        ("9" * 5000, 0, "does not fit in 64 bits"),
        ("9223372036854775808", 0, "does not fit in 64 bits"),
        ("-", 1, "expected a number"),
    ],
)
def test_what_c_would_not_read_as_a_number_is_a_located_error(text, offset, message):
    with pytest.raises(GrammarError) as caught:
        parse_number(text)
    assert message in caught.value.message
    assert caught.value.offset == offset
    assert len(caught.value.message) < 200  # a 5000-digit constant is not quoted in full


@pytest.mark.parametrize(
    ("text", "offset", "message"),
    [
        ("values(1, \u0663)", 10, "unexpected character '٣': numbers are written with the ASCII"),
        ("values(1, \u00b2)", 10, "ASCII digits 0-9"),
        ("values(1, 08)", 10, "invalid digit in octal constant '08'"),
        ("values(1, 12abc)", 12, "invalid suffix 'abc' on constant '12'"),
        ("values(1, 1e400)", 10, "out of range"),
        ("pow2(1, 99999999999999999999)", 8, "does not fit in 64 bits"),
        ("range(1, 1000000000000)", 0, "too large a domain: range(1, 1000000000000) has"),
        ("values(1,\u00a02)", 9, "unexpected character '\\xa0'"),
    ],
)
def test_hostile_domains_are_located_errors(text, offset, message):
    with pytest.raises(GrammarError) as caught:
        parse_domain(text)
    assert message in caught.value.message
    assert caught.value.offset == offset


def test_values_beyond_the_domain_limit_are_an_error(monkeypatch):
    monkeypatch.setattr(grammar, "MAX_DOMAIN_SIZE", 3)
    assert parse_domain("values(1, 2, 3)").values == (1, 2, 3)
    with pytest.raises(GrammarError, match="too large a domain: more than 3 values") as caught:
        parse_domain("values(1, 2, 3, 4, 5)")
    assert caught.value.offset == len("values(1, 2, 3, ")


def test_a_long_values_list_parses_in_linear_time():
    """200,000 values: 0.6 s measured; slicing the rest of the text at every token took 20."""
    values = tuple(range(200_000))
    start = time.perf_counter()
    domain = parse_domain(f"values({', '.join(map(str, values))})")
    assert time.perf_counter() - start < 6
    assert domain.values == values

import pytest

from annotune.annotate.grammar import (
    GrammarError,
    find_tune_comments,
    parse_domain,
    parse_number,
    parse_param_pragma,
)


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

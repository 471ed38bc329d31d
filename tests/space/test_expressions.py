"""The constraint language: parser, C semantics of the evaluator, and its safety."""

from __future__ import annotations

import random
import shutil
import subprocess
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from annotune.space.expressions import (
    MAX_DEPTH,
    Binary,
    Conditional,
    ExpressionError,
    Literal,
    Name,
    Unary,
    evaluate,
    evaluate_with_undefined,
    parse_constant,
    parse_expression,
)

NAMES = ("a", "b", "c", "x", "y")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def value(text: str, **columns: int | float) -> int | float:
    """Evaluate `text` on one row given as keyword arguments."""
    expr = parse_expression(text, NAMES)
    values = evaluate(expr, {k: np.array([v]) for k, v in columns.items()}, rows=1)
    return values[0].item()


def undefined(text: str, **columns: int) -> bool:
    expr = parse_expression(text, NAMES)
    _, mask = evaluate_with_undefined(expr, {k: np.array([v]) for k, v in columns.items()}, 1)
    return bool(mask[0])


def parse_error(text: str) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        parse_expression(text, NAMES)
    return info.value


# -- parsing -----------------------------------------------------------------------------------


def test_tree_shape() -> None:
    expr = parse_expression("a + b * 2 > -c ? x : min(y, 3)", NAMES)
    assert expr.root == Conditional(
        Binary(
            ">", Binary("+", Name("a"), Binary("*", Name("b"), Literal(2))), Unary("-", Name("c"))
        ),
        Name("x"),
        Binary("min", Name("y"), Literal(3)),
    )
    assert expr.names == ("a", "b", "c", "x", "y")
    assert parse_expression("b + a + b", NAMES).names == ("b", "a")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("10 - 4 - 3", 3),  # left-associative
        ("64 / 4 / 2", 8),
        ("17 % 5 * 2", 4),
        ("1 << 2 + 1", 8),  # + binds tighter than <<
        ("1 << 3 >> 1", 4),
        ("1 < 2 == 1", 1),  # < binds tighter than ==
        ("3 > 2 > 1", 0),  # (3 > 2) > 1
        ("6 & 3 == 3", 0),  # == binds tighter than &: 6 & 1
        ("1 | 2 ^ 3 & 1", 3),  # & then ^ then |
        ("5 ^ 1 | 8", 12),
        ("0 || 1 && 0", 0),  # && binds tighter than ||
        ("1 || 0 && 0", 1),
        ("1 ? 2 : 0 ? 3 : 4", 2),  # right-associative ?:
        ("0 ? 2 : 0 ? 3 : 4", 4),
        ("0 ? 1 : 2 + 10", 12),
        ("1 + 1 ? 7 : 8", 7),
        ("-2 * -3", 6),
        ("- - 4", 4),
        ("!0 + !5", 1),
        ("~0", -1),
        ("~5 & 0xff", 250),
        ("+3", 3),
        ("-3 / 2", -1),
        ("!!7", 1),
        ("min(3, -4)", -4),
        ("max(3, -4)", 3),
        ("max(min(1, 2), 0 ? 5 : 6)", 6),
        ("2 * max(1, 2) + 1", 5),
        ("true + true", 2),
        ("false || 0", 0),
        ("0x1F + 010", 39),  # hex and octal constants
        ("10u + 3l + 4ul + 1LL + 2ULL", 20),
        ("1.5 * 2", 3.0),
        (".5 + 1e1 + 2.f", 12.5),
        ("7 / 2.0", 3.5),
        ("3 < 3.5", 1),
        ("1 ? 2 : 2.5", 2.0),  # the usual arithmetic conversions apply to both branches
        ("min(1, 0.5)", 0.5),
    ],
)
def test_constants(text: str, expected: int | float) -> None:
    result = value(text)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("a", "b", "quotient", "remainder"),
    [(7, 2, 3, 1), (-7, 2, -3, -1), (7, -2, -3, 1), (-7, -2, 3, -1), (0, 5, 0, 0), (6, 3, 2, 0)],
)
def test_division_truncates_toward_zero(a: int, b: int, quotient: int, remainder: int) -> None:
    assert value("a / b", a=a, b=b) == quotient
    assert value("a % b", a=a, b=b) == remainder
    assert quotient * b + remainder == a


def test_every_comparison_and_bitwise_operator() -> None:
    rows = {"a": np.array([-3, 0, 5, 5]), "b": np.array([5, 0, 5, -3])}
    expected = {
        "a < b": [1, 0, 0, 0],
        "a <= b": [1, 1, 1, 0],
        "a > b": [0, 0, 0, 1],
        "a >= b": [0, 1, 1, 1],
        "a == b": [0, 1, 1, 0],
        "a != b": [1, 0, 0, 1],
        "a & b": [5, 0, 5, 5],
        "a | b": [-3, 0, 5, -3],
        "a ^ b": [-8, 0, 0, -8],
        "a && b": [1, 0, 1, 1],
        "a || b": [1, 0, 1, 1],
        "a >> 1": [-2, 0, 2, 2],
        "a << 2": [-12, 0, 20, 20],
    }
    for text, want in expected.items():
        got = evaluate(parse_expression(text, NAMES), rows)
        assert got.dtype == np.int64
        assert got.tolist() == want, text


def test_undefined_rows() -> None:
    assert undefined("a / b", a=1, b=0)
    assert undefined("a % b", a=1, b=0)
    assert undefined("a / b", a=INT64_MIN, b=-1)
    assert undefined("1 << a", a=64)
    assert undefined("1 >> a", a=-1)
    assert not undefined("1 << a", a=63)
    assert undefined("a / 0.0", a=1)
    assert undefined("!(a / b)", a=1, b=0)
    assert undefined("min(a / b, 1)", a=1, b=0)
    assert undefined("a / b > 2 && b != 0", a=1, b=0)  # the left side is evaluated first
    assert undefined("(a / b) ? 1 : 2", a=1, b=0)
    # Short-circuits: the undefined side is never evaluated in C.
    assert not undefined("b != 0 && a / b > 2", a=1, b=0)
    assert not undefined("b == 0 || a / b > 2", a=1, b=0)
    assert not undefined("b ? a / b : 0", a=1, b=0)
    assert not undefined("b ? 0 : 1 % b", a=1, b=3) and undefined("b ? 0 : 1 % b", a=1, b=0)
    # An undefined constraint reads as 0: that configuration is illegal.
    assert value("a / b == a / b", a=1, b=0) == 0


def test_signed_overflow_is_undefined_not_wrapped() -> None:
    """C leaves signed overflow undefined; wrapping would let 2^32 * 2^32 pass `<= 1024`."""
    assert undefined("a + 1", a=INT64_MAX) and undefined("a - 1", a=INT64_MIN)
    assert undefined("-a", a=INT64_MIN) and undefined("a * 2", a=2**62)
    assert undefined("a * b", a=-1, b=INT64_MIN) and undefined("a * b", a=INT64_MIN, b=-1)
    assert value("a * b <= 1024", a=2**32, b=2**32) == 0
    assert not undefined("a + b", a=INT64_MAX, b=INT64_MIN)
    assert not undefined("a * b", a=-1, b=INT64_MAX) and not undefined("a * 0", a=INT64_MIN)
    assert value("a * b", a=-(2**31), b=2**32) == INT64_MIN  # exactly representable
    # Only the rows that overflow are undefined, however large the others' operands are.
    a = np.array([1, 2**40, 3, 2**62])
    _, mask = evaluate_with_undefined(parse_expression("a * a + a", NAMES), {"a": a})
    assert mask.tolist() == [False, True, False, True]


def test_vectorized_columns_and_types() -> None:
    expr = parse_expression("a * b <= 1024 && a % 32 == 0", NAMES)
    a = np.array([32, 64, 33, 1024], np.int32)  # narrower integer columns are widened
    b = np.array([32, 32, 1, 2])
    assert evaluate(expr, {"a": a, "b": b}).tolist() == [1, 0, 0, 0]
    floats = parse_expression("a * 0.5 + b", NAMES)
    assert evaluate(floats, {"a": np.array([1.0, 3.0]), "b": np.array([1, 2])}).tolist() == [
        1.5,
        3.5,
    ]
    assert evaluate(parse_expression("1 + 1", NAMES), {}, rows=3).tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="rows must be given"):
        evaluate(parse_expression("1", NAMES), {})


def test_float_column_in_integer_operator_is_an_error() -> None:
    expr = parse_expression("b + a % 2", NAMES)
    with pytest.raises(ExpressionError, match=r"'%'.*floating-point") as info:
        evaluate(expr, {"a": np.array([1.5]), "b": np.array([1])})
    assert info.value.offset == 6


# -- errors ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("__import__('os')", "syntax error: calls are not allowed (only min and max)", 0),
        ("a + os.system(1)", "syntax error: member access is not allowed", 6),
        ("foo(1)", "syntax error: calls are not allowed (only min and max)", 0),
        ("a + exec(1)", "syntax error: calls are not allowed (only min and max)", 4),
        ("x = 3", "syntax error: assignment is not allowed", 2),
        ("x += 3", "syntax error: assignment is not allowed", 2),
        ("x <<= 3", "syntax error: assignment is not allowed", 2),
        ("x++", "syntax error: increment and decrement are not allowed", 1),
        ('"a"', "syntax error: strings are not allowed", 0),
        ("a == 'b'", "syntax error: strings are not allowed", 5),
        ("a[1]", "syntax error: subscripts are not allowed", 1),
        ("x.y", "syntax error: member access is not allowed", 1),
        ("x->y", "syntax error: member access is not allowed", 1),
        ("a, b", "syntax error: the comma operator is not allowed", 1),
        ("(a, b)", "syntax error: expected ')' but found ','", 2),
        ("a b", "syntax error: unexpected 'b'", 2),
        ("a +", "syntax error: unexpected end of expression", 3),
        ("", "syntax error: empty expression", 0),
        ("   ", "syntax error: empty expression", 0),
        ("(a + b", "syntax error: expected ')' but found the end", 6),
        ("a ? b", "syntax error: expected ':' but found the end", 5),
        ("a ? b : ", "syntax error: unexpected end of expression", 8),
        ("min(a)", "syntax error: min takes exactly two arguments", 0),
        ("max(a, b, c)", "syntax error: max takes exactly two arguments", 0),
        ("min(a b)", "syntax error: expected ',' or ')' but found 'b'", 6),
        ("min + 1", "syntax error: expected '(' after 'min'", 4),
        ("a # b", "syntax error: unexpected character '#'", 2),
        ("a ; b", "syntax error: unexpected character ';'", 2),
        ("08", "syntax error: invalid digit in octal constant '08'", 0),
        ("12abc", "syntax error: invalid suffix 'abc' on constant '12'", 2),
        ("1.5u", "syntax error: invalid suffix 'u' on constant '1.5'", 3),
        ("1e", "syntax error: invalid suffix 'e' on constant '1'", 1),
        ("99999999999999999999", "syntax error: integer constant '99999999999999999999'", 0),
        ("a + FOO", "unknown parameter 'FOO' in constraint", 4),
        ("(a) * (zz + q)", "unknown parameter 'zz' in constraint", 7),
        ("a % 2.0", "invalid operands to '%'", 2),
        ("1.5 << 1", "invalid operands to '<<'", 4),
        ("~(a + 0.5)", "invalid operands to '~'", 0),
        ("a & (b ? 1.0 : 2)", "invalid operands to '&'", 2),
        ("a > \u0663", "syntax error: unexpected character '٣': numbers are written with", 4),
        ("a > \uff11\uff10", "syntax error: unexpected character '１': numbers are", 4),
        ("a\u00a0> 1", "syntax error: unexpected character '\\xa0'", 1),
        ("a > " + "9" * 5000, "syntax error: integer constant '99999999999999999999...", 4),
        ("a < 1e400", "syntax error: floating constant '1e400' is out of range", 4),
        ("a < 1" + "0" * 400 + ".0", "syntax error: floating constant", 4),
    ],
)
def test_errors_and_offsets(text: str, message: str, offset: int) -> None:
    error = parse_error(text)
    assert error.message.startswith(message)
    assert str(error) == error.message
    assert error.offset == offset
    assert isinstance(error, ValueError)


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(
        alphabet=st.sampled_from(list("ab01.xXeEuUlL+-*/%<>=!~&^|?:(),[]'\" _²٣")), max_size=30
    )
)
def test_any_text_parses_or_raises_expression_error(text: str) -> None:
    try:
        expr = parse_expression(text, NAMES)
    except ExpressionError as error:
        assert 0 <= error.offset <= len(text)
        return
    columns = {name: np.array([-1, 0, 2]) for name in NAMES}
    evaluate(expr, columns)


def test_long_chains_parse_and_evaluate() -> None:
    """Chains of binary operators make left-deep trees as deep as they are long; nothing
    recurses over them, so their length is no limit."""
    assert value("+".join(["1"] * 5000)) == 5000
    assert value(" || ".join(["a == 7"] * 500 + ["a == 3"]), a=3) == 1
    assert value(" - ".join(["a"] * 2000), a=1) == -1998
    chain = parse_expression(" * ".join(["a"] * 600) + " > 0 && b", NAMES)
    assert chain.names == ("a", "b") and chain.width == 2


@pytest.mark.parametrize(
    ("text", "offset"),
    [
        ("(" * 5000 + "1" + ")" * 5000, 200),  # the 201st parenthesis
        ("a + (" * 300 + "1" + ")" * 300, 4 + 5 * 200),
        ("- " * 3000 + "1", 400),  # unary operators nest too
        ("min(" * 250 + "1, 2" + ")" * 250, 4 * 200 + 3),  # at the call's parenthesis
        ("a ? " * 250 + "1" + " : 0" * 250, 4 * 200 + 2),
    ],
)
def test_nesting_deeper_than_the_limit_is_located(text: str, offset: int) -> None:
    error = parse_error(text)
    assert error.message == f"syntax error: expression is nested more than {MAX_DEPTH} deep"
    assert error.offset == offset


def test_nesting_up_to_the_limit_is_fine() -> None:
    assert value("(" * MAX_DEPTH + "a" + ")" * MAX_DEPTH, a=4) == 4
    assert value("- " * MAX_DEPTH + "a", a=4) == 4
    nested = parse_expression("(a + " * 100 + "b" + ")" * 100, NAMES)
    assert nested.width == 101  # each level keeps its `a` while the inner sum is evaluated


@pytest.mark.parametrize(
    ("text", "value"), [("010", 8), ("0x1Fu", 31), ("1.5f", 1.5), (".5", 0.5), ("7ULL", 7)]
)
def test_constants_on_their_own(text: str, value: int | float) -> None:
    """What annotations and #define values are read with: the constraints' own rules."""
    assert parse_constant(text) == value and type(parse_constant(text)) is type(value)


@pytest.mark.parametrize(
    ("text", "message", "offset"),
    [
        ("", "expected a number", 0),
        ("-1", "expected a number", 0),
        ("1'000", "unexpected \"'\" after the constant '1'", 1),
        ("1_0", "invalid suffix '_0' on constant '1'", 1),
        ("9" * 5000, "does not fit in 64 bits", 0),
    ],
)
def test_constant_errors_are_located(text: str, message: str, offset: int) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_constant(text)
    assert message in caught.value.message and caught.value.offset == offset


def test_nothing_reaches_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing and evaluating never call Python's own evaluators."""
    import builtins

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("Python's evaluator was called")

    for name in ("eval", "exec", "compile"):
        monkeypatch.setattr(builtins, name, forbidden)
    expr = parse_expression("a > 0 && (b % 2 == 0 || min(a, b) < 3) ? 1 : 0", NAMES)
    assert evaluate(expr, {"a": np.array([1, 0]), "b": np.array([3, 4])}).tolist() == [1, 0]


def test_trees_compare_by_structure_not_spelling() -> None:
    tight, loose = parse_expression("a+b*2", NAMES), parse_expression(" a + (b * 2) ", NAMES)
    assert tight.root == loose.root and hash(tight.root) == hash(loose.root)
    assert tight != loose  # the text differs


# -- C semantics: random trees against a scalar reference and against gcc ----------------------


@dataclass(frozen=True)
class Tree:
    """A random integer expression for the property tests: op, children, or a leaf."""

    op: str
    children: tuple[Tree, ...] = ()


BINARY = ("+", "-", "*", "/", "%", "<<", ">>", "<", "<=", ">", ">=", "==", "!=", "&", "^", "|")
BINARY += ("&&", "||", "min", "max")
UNARY = ("-", "+", "!", "~")


def leaves() -> st.SearchStrategy[Tree]:
    return st.one_of(
        st.sampled_from([Tree("x"), Tree("y")]), st.integers(0, 70).map(lambda v: Tree(str(v)))
    )


def trees() -> st.SearchStrategy[Tree]:
    return st.recursive(
        leaves(),
        lambda kids: st.one_of(
            st.tuples(st.sampled_from(UNARY), kids).map(lambda t: Tree(t[0], (t[1],))),
            st.tuples(st.sampled_from(BINARY), kids, kids).map(lambda t: Tree(t[0], t[1:])),
            st.tuples(kids, kids, kids).map(lambda t: Tree("?:", t)),
        ),
        max_leaves=12,
    )


def render(tree: Tree) -> str:
    """Fully parenthesized text."""
    kids = [render(child) for child in tree.children]
    if not kids:
        return tree.op
    if len(kids) == 1:
        return f"{tree.op}({kids[0]})"
    if tree.op in ("min", "max"):
        return f"{tree.op}({kids[0]}, {kids[1]})"
    if tree.op == "?:":
        return f"({kids[0]}) ? ({kids[1]}) : ({kids[2]})"
    return f"({kids[0]}) {tree.op} ({kids[1]})"


class Undefined(Exception):
    pass


def wrap(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def checked(v: int) -> int:
    """Signed arithmetic: a result outside int64 is undefined, not wrapped."""
    if not INT64_MIN <= v <= INT64_MAX:
        raise Undefined
    return v


def c_value(tree: Tree, x: int, y: int) -> int:
    """Scalar C semantics on int64, raising Undefined where C is undefined (signed overflow
    included); `<<` shifts the bits as unsigned, as C++20 and the shifts' SL do."""
    if not tree.children:
        return {"x": x, "y": y}[tree.op] if tree.op in ("x", "y") else int(tree.op)
    if tree.op == "?:":
        condition, if_true, if_false = tree.children
        return c_value(if_true if c_value(condition, x, y) else if_false, x, y)
    if tree.op in ("&&", "||"):
        left = c_value(tree.children[0], x, y) != 0
        if left == (tree.op == "||"):
            return int(left)
        return int(c_value(tree.children[1], x, y) != 0)
    if len(tree.children) == 1:
        a = c_value(tree.children[0], x, y)
        if tree.op == "-":
            return checked(-a)
        return {"+": a, "!": int(a == 0), "~": ~a}[tree.op]
    a, b = (c_value(child, x, y) for child in tree.children)
    if tree.op in ("/", "%"):
        if b == 0 or (a == INT64_MIN and b == -1):
            raise Undefined
        quotient = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
        return quotient if tree.op == "/" else a - b * quotient
    if tree.op in ("<<", ">>"):
        if not 0 <= b <= 63:
            raise Undefined
        return wrap(a << b) if tree.op == "<<" else a >> b
    table = {
        "+": lambda: checked(a + b),
        "-": lambda: checked(a - b),
        "*": lambda: checked(a * b),
        "<": lambda: int(a < b),
        "<=": lambda: int(a <= b),
        ">": lambda: int(a > b),
        ">=": lambda: int(a >= b),
        "==": lambda: int(a == b),
        "!=": lambda: int(a != b),
        "&": lambda: a & b,
        "^": lambda: a ^ b,
        "|": lambda: a | b,
        "min": lambda: a if a < b else b,
        "max": lambda: a if a > b else b,
    }
    return table[tree.op]()


INTS = st.one_of(st.integers(-40, 40), st.sampled_from([INT64_MIN, INT64_MAX, -1, 0, 1, 63, 64]))


@settings(max_examples=400, deadline=None)
@given(tree=trees(), rows=st.lists(st.tuples(INTS, INTS), min_size=4, max_size=24))
def test_evaluator_agrees_with_scalar_c_semantics(tree: Tree, rows: list[tuple[int, int]]) -> None:
    expr = parse_expression(render(tree), ("x", "y"))
    columns = {"x": np.array([r[0] for r in rows]), "y": np.array([r[1] for r in rows])}
    values, mask = evaluate_with_undefined(expr, columns, len(rows))
    for (x, y), got, got_undefined in zip(rows, values.tolist(), mask.tolist(), strict=True):
        try:
            want = c_value(tree, x, y)
        except Undefined:
            assert got_undefined, (render(tree), x, y)
            continue
        assert not got_undefined, (render(tree), x, y)
        assert got == want, (render(tree), x, y)


@settings(max_examples=200, deadline=None)
@given(pairs=st.lists(st.tuples(INTS, INTS), min_size=1, max_size=50))
def test_division_and_remainder_property(pairs: list[tuple[int, int]]) -> None:
    """The two operators where C and Python differ most, on their own."""
    columns = {"x": np.array([p[0] for p in pairs]), "y": np.array([p[1] for p in pairs])}
    for op in ("/", "%"):
        values, mask = evaluate_with_undefined(parse_expression(f"x {op} y", NAMES), columns)
        for (x, y), got, got_undefined in zip(pairs, values.tolist(), mask.tolist(), strict=True):
            try:
                want = c_value(Tree(op, (Tree("x"), Tree("y"))), x, y)
            except Undefined:
                assert got_undefined
                continue
            assert not got_undefined and got == want, (x, op, y)


def render_loosely(tree: Tree, rng: random.Random, c: bool) -> str:
    """Text with parentheses dropped at random, so the parsers' precedence decides its meaning.

    Shifts stay explicit calls in C (to catch an out-of-range count), so in our text they are
    delimited the same way. `c` selects the C spelling: SL/SR for shifts, and literals through
    L(), a function, so that gcc cannot fold `!5 / x` into 0 where x is 0.
    """

    def sub(child: Tree) -> str:
        text = render_loosely(child, rng, c)
        return f"({text})" if child.children and rng.random() < 0.3 else text

    if not tree.children:
        return f"L({tree.op})" if c and tree.op not in ("x", "y") else tree.op
    kids = tree.children
    if tree.op in ("min", "max", "<<", ">>"):
        first, second = (render_loosely(child, rng, c) for child in kids)
        if tree.op in ("<<", ">>"):
            if c:
                return f"{'SL' if tree.op == '<<' else 'SR'}({first}, {second})"
            return f"(({first}) {tree.op} ({second}))"
        return f"{tree.op}({first}, {second})"
    if len(kids) == 1:
        return f"{tree.op} {sub(kids[0])}"
    if tree.op == "?:":
        return f"{sub(kids[0])} ? {sub(kids[1])} : {sub(kids[2])}"
    return f"{sub(kids[0])} {tree.op} {sub(kids[1])}"


CXX_PRELUDE = r"""
#include <csetjmp>
#include <csignal>
#include <cstdio>
static sigjmp_buf trap;
static void on_trap(int sig) { (void)sig; siglongjmp(trap, 1); }
static void undefined() { raise(SIGFPE); }
// Every operand is an I, whose + - * and unary - trap on signed overflow. Built-in arithmetic
// would not do: g++ folds (x - y) != 0 into x != y, as wrapping allows, and loses the overflow.
struct I {
    long long v;
    I(long long value) : v(value) {}
    explicit operator bool() const { return v != 0; }
    explicit operator long long() const { return v; }
};
#define CHECKED(op, f) \
    static I operator op(I a, I b) { long long r; if (f(a.v, b.v, &r)) undefined(); return r; }
CHECKED(+, __builtin_add_overflow)
CHECKED(-, __builtin_sub_overflow)
CHECKED(*, __builtin_mul_overflow)
static I operator-(I a) { return I(0) - a; }
static I operator+(I a) { return a; }
static I operator~(I a) { return ~a.v; }
static I operator/(I a, I b) { return a.v / b.v; }  // x86 traps (SIGFPE) on / 0 and MIN / -1
static I operator%(I a, I b) { return a.v % b.v; }
static I operator<(I a, I b) { return a.v < b.v; }
static I operator<=(I a, I b) { return a.v <= b.v; }
static I operator>(I a, I b) { return a.v > b.v; }
static I operator>=(I a, I b) { return a.v >= b.v; }
static I operator==(I a, I b) { return a.v == b.v; }
static I operator!=(I a, I b) { return a.v != b.v; }
static I operator&(I a, I b) { return a.v & b.v; }
static I operator^(I a, I b) { return a.v ^ b.v; }
static I operator|(I a, I b) { return a.v | b.v; }
static I SL(I a, I b) {
    if (b.v < 0 || b.v > 63) undefined();
    return (long long)((unsigned long long)a.v << b.v);
}
static I SR(I a, I b) { if (b.v < 0 || b.v > 63) undefined(); return a.v >> b.v; }
static I L(long long v) { return v; }
static I min(I a, I b) { return a.v < b.v ? a : b; }
static I max(I a, I b) { return a.v > b.v ? a : b; }
"""


def test_evaluator_agrees_with_gcc(tmp_path) -> None:
    """300 random expressions, run by one C++ program: division by zero and signed overflow
    trap (SIGFPE), and the trap marks the row undefined; C's own precedence and && || ?:
    (which decide the operands evaluated) are g++'s, the same as C's for these operators."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("g++ is not installed")
    rng = random.Random(20261122)
    exprs = [random_tree(rng, depth=5) for _ in range(300)]
    xs = [-7, -3, -1, 0, 1, 2, 3, 5, 8, 13, 64, -64, 1000, INT64_MAX, INT64_MIN]
    rows = [(x, y) for x in xs for y in (-5, -1, 0, 1, 2, 7, 63)]
    ours = [render_loosely(e, random.Random(i), c=False) for i, e in enumerate(exprs)]
    theirs = [render_loosely(e, random.Random(i), c=True) for i, e in enumerate(exprs)]
    body = "\n".join(
        f'    if (sigsetjmp(trap, 1) == 0) printf("%lld\\n", (long long)({text}));'
        '\n    else puts("U");'
        for text in theirs
    )
    row_values = ", ".join(f"{{{x}LL, {y}LL}}" for x, y in rows).replace(
        f"{INT64_MIN}LL", "(-9223372036854775807LL - 1)"
    )
    source = (
        CXX_PRELUDE
        + f"static const long long ROWS[][2] = {{{row_values}}};\n"
        + "int main() {\n"
        + "    struct sigaction action = {};\n"
        + "    action.sa_handler = on_trap;\n"
        + "    sigaction(SIGFPE, &action, nullptr);\n"
        + f"    for (int r = 0; r < {len(rows)}; r++) {{\n"
        + "    I x = ROWS[r][0], y = ROWS[r][1];\n"
        + body
        + "\n    }\n    return 0;\n}\n"
    )
    (tmp_path / "exprs.cpp").write_text(source)
    subprocess.run(
        [gxx, "-O0", "-w", "-o", str(tmp_path / "exprs"), str(tmp_path / "exprs.cpp")], check=True
    )
    output = subprocess.run([str(tmp_path / "exprs")], check=True, capture_output=True, text=True)
    lines = output.stdout.split()
    assert len(lines) == len(rows) * len(exprs)
    columns = {"x": np.array([r[0] for r in rows]), "y": np.array([r[1] for r in rows])}
    checked = 0
    for i, text in enumerate(ours):
        values, mask = evaluate_with_undefined(parse_expression(text, ("x", "y")), columns)
        for r, (got, got_undefined) in enumerate(zip(values.tolist(), mask.tolist(), strict=True)):
            want = lines[r * len(exprs) + i]
            if want == "U":
                assert got_undefined, (text, rows[r])
            else:
                assert not got_undefined and got == int(want), (text, rows[r], want, got)
                checked += 1
    assert checked > len(rows) * len(exprs) // 2


def random_tree(rng: random.Random, depth: int) -> Tree:
    if depth == 0 or rng.random() < 0.2:
        return Tree(rng.choice(["x", "y", str(rng.randint(1, 20))]))
    kind = rng.random()
    if kind < 0.15:
        return Tree(rng.choice(UNARY), (random_tree(rng, depth - 1),))
    if kind < 0.25:
        return Tree("?:", tuple(random_tree(rng, depth - 1) for _ in range(3)))
    return Tree(rng.choice(BINARY), (random_tree(rng, depth - 1), random_tree(rng, depth - 1)))

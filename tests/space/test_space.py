"""The search space: validation, enumeration against brute force, sampling, encoding."""

from __future__ import annotations

import itertools
import math
import re
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

from annotune import space as space_module
from annotune.space import Constraint, Param, Space, SpaceError, SpaceTooLarge
from annotune.space import chunks as chunks_module


def brute_force(space: Space, legal: Callable[..., bool]) -> list[tuple[int, ...]]:
    """Legal index rows by itertools, first parameter slowest."""
    domains = [range(len(p.values)) for p in space.params]
    return [
        row
        for row in itertools.product(*domains)
        if legal(**{p.name: p.values[i] for p, i in zip(space.params, row, strict=True)})
    ]


def c_div(a: int, b: int) -> int:
    return abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)


SPACES = [
    (
        [
            Param("bx", (16, 32, 64, 128), 32),
            Param("by", (1, 2, 4, 8), 1),
            Param("u", (1, 2, 3), 1),
        ],
        ["bx * by <= 256", "u == 1 || bx % (u * 16) == 0"],
        lambda bx, by, u: bx * by <= 256 and (u == 1 or bx % (u * 16) == 0),
    ),
    (
        [Param("a", (-3, -1, 0, 2, 5), 0), Param("b", (-2, 0, 1, 3), 1)],
        ["b != 0 && a / b < 1", "a % 2 == 0 || a < 0"],
        lambda a, b: b != 0 and c_div(a, b) < 1 and (a % 2 == 0 or a < 0),
    ),
    (
        [Param("t", (0.5, 1.0, 2.5), 1.0), Param("n", (1, 2, 3, 4), 1), Param("f", (0, 1), 0)],
        ["t * n > 2 ? f : !f"],
        lambda t, n, f: f if t * n > 2 else not f,
    ),
    (  # a row where the constraint divides by zero is illegal, not an error
        [Param("p", (0, 1, 2, 3), 1), Param("q", (0, 2, 4), 2)],
        ["12 / p > q"],
        lambda p, q: p != 0 and 12 // p > q,
    ),
]


@pytest.mark.parametrize(("params", "constraints", "legal"), SPACES)
def test_enumeration_matches_brute_force(params, constraints, legal) -> None:
    space = Space(params, constraints)
    expected = brute_force(space, legal)
    assert space.cartesian_size == math.prod(len(p.values) for p in params)
    assert space.count_legal() == len(expected)
    indices = space.legal_indices()
    assert indices.dtype == np.int32 and indices.shape == (len(expected), len(params))
    assert [tuple(row) for row in indices.tolist()] == expected
    # Chunk boundaries change nothing, and only non-empty chunks come out.
    chunks = list(space.iter_legal(chunk_size=5))
    assert all(len(chunk) for chunk in chunks)
    assert np.array_equal(np.concatenate(chunks), indices)
    every_row = np.array(list(itertools.product(*(range(len(p.values)) for p in params))))
    assert space.is_legal(every_row).tolist() == [
        tuple(r) in set(expected) for r in every_row.tolist()
    ]


def test_constraints_may_be_given_as_objects_and_are_kept_parsed() -> None:
    space = Space([Param("a", (1, 2, 3), 1)], [Constraint("a > 1"), Constraint("a != 3")])
    assert space.constraints == (Constraint("a > 1"), Constraint("a != 3"))
    assert [e.names for e in space.expressions] == [("a",), ("a",)]
    assert space.to_dicts(space.legal_indices()) == [{"a": 2}]


def test_no_parameters_and_constant_constraints() -> None:
    assert Space([], []).legal_indices().shape == (1, 0)
    assert Space([], ["0"]).count_legal() == 0
    assert Space([Param("a", (1, 2), 1)], ["1 + 1"]).count_legal() == 2
    assert Space([Param("a", (1, 2), 1)], ["1 / 0 || a"]).count_legal() == 0


def test_huge_cartesian_size_is_exact() -> None:
    params = [Param(f"p{i}", tuple(range(1000)), 0) for i in range(30)]
    space = Space(params, ["p0 < p1"])
    assert space.cartesian_size == 1000**30
    with pytest.raises(SpaceTooLarge, match="sample it instead"):
        space.legal_indices()
    with pytest.raises(SpaceTooLarge):
        space.count_legal()
    rows = space.sample(50, np.random.default_rng(0))
    assert rows.shape == (50, 30) and space.is_legal(rows).all()
    assert len({tuple(r) for r in rows.tolist()}) == 50


# -- validation --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "message", "name"),
    [
        ([Param("a", (), 1)], "parameter 'a' has an empty domain", "a"),
        ([Param("a", (1, 2, 1), 1)], "parameter 'a' has the value 1 twice", "a"),
        ([Param("a", (1, 1.0), 1)], "parameter 'a' has the value 1.0 twice", "a"),
        ([Param("a", (1, 2), 3)], "default 3 of parameter 'a' is not in its domain", "a"),
        ([Param("a", (1,), 1), Param("a", (2,), 2)], "duplicate parameter 'a'", "a"),
        ([Param("2x", (1,), 1)], "parameter name '2x' is not a C identifier", "2x"),
        ([Param("max", (1,), 1)], "parameter name 'max' is reserved", "max"),
        ([Param("a", (1, "b"), 1)], "parameter 'a' has the value 'b'; values must be", "a"),
        ([Param("a", (1.0, math.nan), 1.0)], "parameter 'a' has the value nan;", "a"),
        ([Param("a", (2**64,), 2**64)], "parameter 'a' has the value 18446744073709551616", "a"),
    ],
)
def test_param_validation(params: list[Param], message: str, name: str) -> None:
    with pytest.raises(SpaceError, match=re.escape(message)) as info:
        Space(params, [])
    assert info.value.param == name and info.value.constraint is None


@pytest.mark.parametrize(
    ("constraint", "message", "offset"),
    [
        ("a > 1 && bogus", "unknown parameter 'bogus' in constraint", 9),
        ("a +", "syntax error: unexpected end of expression", 3),
        ("system('x')", "syntax error: calls are not allowed (only min and max)", 0),
        ("t % 2 == 0", "invalid operands to '%'", 2),  # t is floating-point
    ],
)
def test_constraint_errors_name_the_constraint(constraint: str, message: str, offset: int) -> None:
    params = [Param("a", (1, 2), 1), Param("t", (0.5, 1.5), 0.5)]
    with pytest.raises(SpaceError, match=re.escape(message)) as info:
        Space(params, ["a > 0", constraint])
    assert info.value.constraint == 1 and info.value.offset == offset


def test_numpy_and_bool_values_become_python_numbers() -> None:
    space = Space([Param("a", (np.int64(1), np.int32(4)), 4), Param("b", (False, True), True)], [])
    dicts = space.to_dicts(space.legal_indices())
    assert dicts[0] == {"a": 1, "b": 0}
    assert all(type(v) is int for d in dicts for v in d.values())


# -- encoding ----------------------------------------------------------------------------------


def test_decode_dicts_and_default() -> None:
    space = Space([Param("n", (8, 16, 32), 16), Param("r", (0.25, 1.0), 1.0)], [])
    assert space.default_row().tolist() == [1, 1] and space.default_row().dtype == np.int32
    rows = np.array([[0, 0], [2, 1]])
    decoded = space.decode(rows)
    assert decoded.dtype == np.float64 and decoded.tolist() == [[8.0, 0.25], [32.0, 1.0]]
    dicts = space.to_dicts(rows)
    assert dicts == [{"n": 8, "r": 0.25}, {"n": 32, "r": 1.0}]
    assert type(dicts[0]["n"]) is int and type(dicts[0]["r"]) is float
    assert space.names == ("n", "r") and space.sizes == (3, 2)


@pytest.mark.parametrize(
    "rows",
    [
        np.array([0, 1]),
        np.array([[0, 1, 0]]),
        np.array([[0.0, 1.0]]),
        np.array([[3, 0]]),
        np.array([[-1, 0]]),
    ],
)
def test_bad_index_rows(rows: np.ndarray) -> None:
    space = Space([Param("n", (8, 16, 32), 16), Param("r", (0.25, 1.0), 1.0)], [])
    with pytest.raises(ValueError):
        space.is_legal(rows)


# -- first emptying constraint -----------------------------------------------------------------


def test_first_emptying_constraint() -> None:
    a = [Param("a", tuple(range(10)), 0), Param("b", tuple(range(10)), 0)]
    assert Space(a, ["a > 1", "a < 3"]).first_emptying_constraint() is None
    assert Space(a, []).first_emptying_constraint() is None
    assert Space(a, ["a > 20", "b > 1"]).first_emptying_constraint() == 0
    # Each is satisfiable alone; together the third leaves nothing.
    assert Space(a, ["a > 1", "a < 3", "a > 5", "b > 0"]).first_emptying_constraint() == 2
    assert Space(a, ["a > 1", "a < 3", "a > 5"]).count_legal() == 0


def test_first_emptying_constraint_across_chunks() -> None:
    # 2**21 rows: two chunks; the deepest constraint reached is in the second one.
    params = [Param(f"p{i}", (0, 1), 0) for i in range(21)]
    space = Space(params, ["p0 == 1", "p20 == 1 && p1 == 1", "p0 == 0"])
    assert space.first_emptying_constraint() == 2


def test_first_emptying_constraint_of_a_huge_space() -> None:
    params = [Param(f"p{i}", tuple(range(100)), 0) for i in range(6)]
    assert Space(params, ["p0 < p1"]).first_emptying_constraint() is None
    with pytest.raises(SpaceTooLarge, match="no legal configuration"):
        Space(params, ["p0 > 200"]).first_emptying_constraint()


# -- sampling ----------------------------------------------------------------------------------

TRIANGLE = [Param("a", tuple(range(6)), 0), Param("b", tuple(range(6)), 0)]


def assert_uniform(space: Space, n: int, repeats: int) -> None:
    rng = np.random.default_rng(7)
    legal = {tuple(r) for r in space.legal_indices().tolist()}
    counts: Counter[tuple[int, ...]] = Counter()
    for _ in range(repeats):
        rows = [tuple(r) for r in space.sample(n, rng).tolist()]
        assert len(set(rows)) == n and set(rows) <= legal
        counts.update(rows)
    expected = repeats * n / len(legal)
    assert set(counts) == legal
    # Each count is binomial; 6 standard deviations is never reached by chance here.
    bound = 6 * math.sqrt(expected)
    assert all(abs(c - expected) < bound for c in counts.values()), counts


def test_sample_is_uniform_when_enumerated() -> None:
    space = Space(TRIANGLE, ["a + b < 6"])
    assert_uniform(space, n=3, repeats=3000)


def test_sample_is_uniform_by_rejection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space_module, "SAMPLE_ENUMERATION_LIMIT", 0)
    space = Space(TRIANGLE, ["a + b < 6"])
    assert_uniform(space, n=5, repeats=1000)


def test_sample_edge_cases() -> None:
    space = Space(TRIANGLE, ["a + b < 6"])
    rng = np.random.default_rng(1)
    assert space.sample(0, rng).shape == (0, 2)
    everything = space.sample(21, rng)
    assert sorted(map(tuple, everything.tolist())) == sorted(
        map(tuple, space.legal_indices().tolist())
    )
    with pytest.raises(SpaceError, match="cannot sample 22 distinct configurations: only 21"):
        space.sample(22, rng)
    with pytest.raises(ValueError):
        space.sample(-1, rng)


def test_sparse_space_falls_back_to_enumeration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space_module, "SAMPLE_ENUMERATION_LIMIT", 0)
    monkeypatch.setattr(space_module, "MAX_SAMPLE_DRAWS", 10_000)
    params = [Param(f"p{i}", tuple(range(20)), 0) for i in range(4)]
    space = Space(params, ["p0 + p1 + p2 + p3 == 1"])  # 4 legal rows of 160,000
    rows = space.sample(4, np.random.default_rng(3))
    assert sorted(map(tuple, rows.tolist())) == sorted(map(tuple, space.legal_indices().tolist()))


def test_too_sparse_huge_space_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(space_module, "MAX_SAMPLE_DRAWS", 50_000)
    params = [Param(f"p{i}", tuple(range(1000)), 0) for i in range(5)]
    space = Space(params, ["p0 + p1 + p2 + p3 + p4 < 3"])
    with pytest.raises(SpaceError, match=r"found only \d+ of 10 distinct legal configurations"):
        space.sample(10, np.random.default_rng(0))


def test_sample_from_a_large_space() -> None:
    params = [Param(f"p{i}", tuple(range(1000)), 0) for i in range(5)]
    space = Space(params, ["p0 + p1 > p2", "p3 % 4 != 1"])
    rows = space.sample(1000, np.random.default_rng(5))
    assert rows.shape == (1000, 5) and rows.dtype == np.int32
    assert space.is_legal(rows).all()
    assert len({tuple(r) for r in rows.tolist()}) == 1000
    # Roughly uniform: the first coordinate's mean is near its mean over the legal set (~550,
    # with a standard error of ~9 for 1000 rows).
    assert 510 < rows[:, 0].mean() < 590


def test_search_rows_are_every_legal_row_or_a_uniform_sample_of_them():
    space = Space([Param("a", tuple(range(10)), 0), Param("b", tuple(range(10)), 1)], ["a != b"])
    rows, count = space.search_rows(np.random.default_rng(0))
    assert count == 90 and len(rows) == 90
    sample, count = space.search_rows(np.random.default_rng(0), limit=25)
    assert count == 90 and len(sample) == 25
    assert len({tuple(r) for r in sample.tolist()}) == 25
    assert all(a != b for a, b in space.decode(sample).tolist())


# -- scale and hostile spaces -------------------------------------------------------------------


def test_a_million_value_domain_is_checked_in_linear_time() -> None:
    """0.3 s measured (benchmarks/scale.py); a membership test per value took minutes."""
    start = time.perf_counter()
    space = Space([Param("n", tuple(range(1, 10**6 + 1)), 5)], ["n % 7 == 0"])
    assert space.count_legal() == 142_857
    with pytest.raises(SpaceError, match="has the value 999999 twice"):
        Space([Param("n", (*range(10**6), 999_999), 5)], [])
    assert time.perf_counter() - start < 5


def test_many_parameters_are_checked_in_linear_time() -> None:
    """50,000 parameters: 0.2 s measured; comparing each name with all before it took 14 s."""
    start = time.perf_counter()
    space = Space([Param(f"p{i}", (0, 1), 0) for i in range(50_000)], ["p0 || p49999"])
    assert time.perf_counter() - start < 3
    rows = np.zeros((3, 50_000), np.int32)
    rows[1, 0] = rows[2, -1] = 1
    assert space.is_legal(rows).tolist() == [False, True, True]


def test_configurations_are_looked_up_without_scanning_the_domain() -> None:
    space = Space([Param("n", tuple(range(10**6)), 0), Param("t", (0.5, 1.0), 1.0)], [])
    start = time.perf_counter()
    rows = [space.index_row({"n": 999_999, "t": 1}) for _ in range(2000)]
    assert time.perf_counter() - start < 2  # 20 s when each lookup walked the tuple
    assert rows[0].tolist() == [999_999, 1]  # 1 == 1.0, as in C and Python
    assert space.index_row({"n": [1], "t": 1.0}) is None  # unhashable: in no domain


def test_signed_overflow_makes_a_configuration_illegal() -> None:
    """2^32 * 2^32 wraps to 0 in 64 bits; it must not pass `<= 1024`."""
    space = Space([Param("bx", (16, 2**32), 16), Param("by", (4, 2**32), 4)], ["bx * by <= 1024"])
    assert space.to_dicts(space.legal_indices()) == [{"bx": 16, "by": 4}]


def test_a_space_too_large_to_count_says_so() -> None:
    space = Space([Param(f"p{i}", tuple(range(1000)), 0) for i in range(4)], ["p0 < p1"])
    with pytest.raises(SpaceTooLarge, match="1,000,000,000,000 configurations, too large to count"):
        space.count_legal()


def test_chunks_shrink_to_the_memory_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chunks_module, "CHUNK_BYTES", 1 << 16)  # 64 KiB: chunks of 720 rows
    space = Space([Param("a", tuple(range(60)), 0), Param("b", tuple(range(60)), 0)], ["a < b"])
    chunks = list(space.iter_legal())
    assert max(len(chunk) for chunk in chunks) <= 1024 and len(chunks) > 1
    assert sum(map(len, chunks)) == 60 * 59 // 2
    every_row = np.array(list(itertools.product(range(60), repeat=2)))
    assert space.is_legal(every_row).tolist() == [a < b for a, b in every_row.tolist()]


def test_a_deeply_nested_constraint_is_evaluated_in_bounded_memory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """150 levels keep 151 columns alive at once; 2^17 rows of them would take 160 MB."""
    monkeypatch.setattr(chunks_module, "CHUNK_BYTES", 1 << 22)
    params = [Param(f"p{i}", (0, 1), 0) for i in range(17)]
    space = Space(params, ["(p0 + " * 150 + "p1" + ")" * 150 + " > 149"])
    tracemalloc.start()
    try:
        count = space.count_legal()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 2**16  # p0 == 1
    assert peak < 4 * (1 << 22)

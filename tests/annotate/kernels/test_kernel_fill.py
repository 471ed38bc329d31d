"""Fill rules: how an input array of kernel mode is filled (`in(COUNT, RULE)`), in a pragma or a
config, checked where it is written and when a configuration's launch is computed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from annotune.annotate.kernels import KernelSpec, LaunchArg, LaunchError, kernel_specs
from annotune.annotate.kernels.launch import checked_fill
from annotune.annotate.source import parse_source
from annotune.core.diagnostics import AnnotuneError
from annotune.run.kernel import INTEGER_INPUT_LIMIT, input_data

SOURCE = """\
#define N 4096
#define TILE 16
#pragma annotune kernel gather grid(N / TILE) block(TILE) args({args})
__global__ void gather(const int *index, const float *in, float *out, signed char *flags) {{
  int i = blockIdx.x * TILE + threadIdx.x;
  out[i] = in[index[i]] * flags[i];
}}
"""
GOOD = "in(N, range(0, N)), in(N, uniform(-1, 1)), out(N), inout(N, value(1))"


def spec_of(tmp_path: Path, args: str) -> KernelSpec:
    path = tmp_path / "gather.cu"
    path.write_text(SOURCE.format(args=args))
    (spec,) = kernel_specs(parse_source(path), ["TILE"])
    return spec


def test_each_input_is_filled_by_its_rule_and_the_bounds_are_evaluated_per_launch(tmp_path):
    spec = spec_of(tmp_path, GOOD)
    index, values, out, flags = spec.launch({"TILE": 32}).args
    assert index.fill == ("range", (0, 4096)) and values.fill == ("uniform", (-1, 1))
    assert out.fill is None and flags.fill == ("value", (1,))
    rng = np.random.default_rng(0)
    drawn = input_data(index, rng)
    assert drawn.dtype == np.int32 and drawn.min() >= 0 and drawn.max() < 4096
    assert drawn.max() >= INTEGER_INPUT_LIMIT  # not the default rule's [0, 100)
    uniform = input_data(values, rng)
    assert uniform.dtype == np.float32 and uniform.min() < 0 and uniform.max() < 1
    assert (input_data(flags, rng) == 1).all()
    assert spec.args[0].to_json()["fill"] == {"rule": "range", "bounds": ["0", "N"]}


def test_iota_counts_and_no_rule_keeps_the_default(tmp_path):
    iota = LaunchArg("i", "in", "int32", count=5, fill=("iota", ()))
    assert input_data(iota, np.random.default_rng(0)).tolist() == [0, 1, 2, 3, 4]
    plain = LaunchArg("x", "in", "float32", count=1000)
    expected = np.random.default_rng(7).random(1000).astype(np.float32)
    assert (input_data(plain, np.random.default_rng(7)) == expected).all()


def test_a_vector_types_array_is_count_by_lanes_each_lane_an_element():
    points = LaunchArg("p", "in", "(4,)float64", count=3)
    drawn = input_data(points, np.random.default_rng(1))
    assert drawn.shape == (3, 4) and drawn.dtype == np.float64 and drawn.nbytes == 3 * 32
    assert (drawn == np.random.default_rng(1).random(12).reshape(3, 4)).all()
    iota = LaunchArg("i", "in", "(2,)int32", count=3, fill=("iota", ()))
    assert input_data(iota, np.random.default_rng(0)).tolist() == [[0, 1], [2, 3], [4, 5]]
    bytes_ = LaunchArg("c", "in", "(3,)uint8", count=2, fill=("range", (0, 300)))
    with pytest.raises(LaunchError, match="does not fit its type uchar3"):
        checked_fill("range", bytes_.dtype, "uchar3", 2, (0, 300), "the fill of 'c'")


def test_a_structs_numbers_are_each_filled_as_an_array_of_them_and_padding_is_zero():
    particles = LaunchArg("p", "in", "(3,)<f4,V4,<i8", count=5, fill=("range", (0, 7)))
    drawn = input_data(particles, np.random.default_rng(2))
    assert drawn.dtype.itemsize == 24 and drawn.shape == (5,)
    assert drawn["f0"].shape == (5, 3) and drawn["f0"].dtype == np.float32
    assert set(drawn["f2"].tolist()) <= set(range(7)) and drawn["f1"].tobytes() == bytes(5 * 4)
    with pytest.raises(LaunchError, match="does not fit its type Particle"):
        checked_fill("range", "<f4,u1", "Particle", 5, (0, 300), "the fill of 'p'")
    assert checked_fill("range", "<f4,<i2", "Particle", 5, (0, 300), "f") == ("range", (0, 300))


@pytest.mark.parametrize(
    ("args", "needle", "message"),
    [
        ("in(N), in(N), out(N, iota), inout(N)", "iota", "out(...) array starts as zeros"),
        ("in(N, sorted), in(N), out(N), inout(N)", "sorted", "unknown fill 'sorted'"),
        ("in(N, range(0)), in(N), out(N), inout(N)", "range", "'range' takes 2 bounds"),
        ("in(N, iota(3)), in(N), out(N), inout(N)", "iota", "'iota' takes no bounds"),
        ("in(N, range(0, M)), in(N), out(N), inout(N)", "M)", "unknown name 'M'"),
        ("in(N, value(1), 2), in(N), out(N), inout(N)", "in(N, value", "takes the element count"),
    ],
)
def test_a_bad_fill_is_an_error_where_it_is_written(tmp_path, args, needle, message):
    with pytest.raises(AnnotuneError) as caught:
        spec_of(tmp_path, args)
    assert message in caught.value.message
    line = SOURCE.format(args=args).splitlines()[2]
    assert caught.value.location is not None
    assert (caught.value.location.line, caught.value.location.column) == (
        3,
        line.index(needle) + 1,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("in(N, range(TILE, 16)), in(N), out(N), inout(N)", "is empty: range"),
        ("in(N), in(N), out(N), inout(N, value(200))", "does not fit its type signed char"),
        ("in(N), in(N), out(N), inout(N, iota)", "does not fit its type signed char"),
    ],
)
def test_a_fill_a_configuration_cannot_make_fails_that_launch_only(tmp_path, args, message):
    spec = spec_of(tmp_path, args)
    with pytest.raises(LaunchError, match=message):
        spec.launch({"TILE": 32})
    if "TILE" in args:
        spec.launch({"TILE": 8})  # range(8, 16) is not empty


def test_a_macro_only_a_fill_bound_names_is_evaluated_at_launch(tmp_path):
    """`M` appears in no launch expression, only in a fill's bound: the launch still needs it
    (on 2ff752e, a KeyError at launch)."""
    source = tmp_path / "k.cu"
    source.write_text(
        "#define N 64\n#define M 7\n"
        "__global__ void k(const int *idx, float *out) {}\n"
        "#pragma annotune kernel k grid(1) block(B) args(in(N, range(0, M)), out(N))\n"
    )
    (spec,) = kernel_specs(parse_source(source), ("B",))
    launch = spec.launch({"B": 32})
    assert launch.args[0].fill == ("range", (0, 7))

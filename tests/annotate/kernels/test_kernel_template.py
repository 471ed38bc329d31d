"""Template kernels in kernel mode: `NAME<ARGS>` in a pragma or a config names the instance to
tune; a number among its arguments may be a knob, so a block size passed as a template parameter
is reachable. Parameter types come from the instance (`T *` is the type argument's pointer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.kernels import LaunchError, kernel_specs
from annotune.annotate.source import parse_source
from annotune.core.diagnostics import AnnotuneError

TEMPLATE = """\
typedef double real;
#define BS 128
namespace ns {
template <typename T, int B, bool FAST = false>
__global__ void scale(T *__restrict__ a, const T *b, T f, int n) {
  int i = blockIdx.x * B + threadIdx.x;
  if (i < n) a[i] = b[i] * f;
}
}
"""
WITH_N = TEMPLATE.replace("#define BS 128", "#define BS 128\n#define N 4096")
LAUNCH = "grid((N + 255) / 256) block(BS) args(out(N), in(N), 2.0, N)"


def specs_of(tmp_path: Path, name: str, params=("BS", "N")):
    source = tmp_path / "k.cu"
    source.write_text(f"{TEMPLATE}#pragma annotune kernel {name} {LAUNCH}\n")
    return kernel_specs(parse_source(source), params)


def error_of(tmp_path: Path, name: str) -> AnnotuneError:
    with pytest.raises(AnnotuneError) as caught:
        specs_of(tmp_path, name)
    return caught.value


def column(error: AnnotuneError) -> int:
    assert error.location is not None and error.location.line == 10
    return error.location.column


def test_the_instance_types_its_parameters_and_follows_the_knobs(tmp_path):
    (spec,) = specs_of(tmp_path, "scale<real, BS * 2, BS == 128>")
    assert [(a.name, a.kind, a.dtype) for a in spec.args] == [
        ("a", "out", "float64"),
        ("b", "in", "float64"),
        ("f", "scalar", "float64"),
        ("n", "scalar", "int32"),
    ]
    assert spec.args[1].const and spec.mangled_name == ""
    # a typedef is written as its canonical type: the demangled symbol shows `double`
    assert spec.instance({"BS": 128, "N": 10}) == "ns::scale<double, 256, true>"
    assert spec.instance({"BS": 64, "N": 10}) == "ns::scale<double, 128, false>"
    assert spec.to_json()["template"] == ["real", "BS * 2", "BS == 128"]


def test_nested_template_arguments_and_defaults(tmp_path):
    (spec,) = specs_of(tmp_path, "scale< float , (BS > 64 ? BS : 64) >")
    assert spec.instance({"BS": 32, "N": 1}) == "ns::scale<float, 64>"
    assert spec.args[0].dtype == "float32"


def test_a_template_argument_that_is_no_integer_fails_that_configuration(tmp_path):
    (spec,) = specs_of(tmp_path, "scale<float, BS / 3.0>")
    with pytest.raises(LaunchError, match="not an integer"):
        spec.instance({"BS": 128, "N": 1})


@pytest.mark.parametrize(
    ("name", "message", "where"),
    [
        ("scale", "'scale' is a template kernel: name the instance", "scale grid"),
        ("scale<float>", "no template argument for 'B'", "<float>"),
        ("scale<float, 1, true, 4>", "too many template arguments", "4>"),
        ("scale<nosuch, BS>", "is not an instance C++ accepts", "<nosuch"),
        ("scale<float, BS + ZZ>", "unknown name 'ZZ'", "ZZ"),
        # a name that is no knob may be C++'s (an enumerator): libclang judges the instance
        ("scale<float, ZZ>", "use of undeclared identifier 'ZZ'", "<float, ZZ"),
        ("scale<float, BS", "unclosed '<'", "<float"),
        ("scale<, BS>", "empty template argument", ", BS"),
    ],
)
def test_mistakes_are_located(tmp_path, name, message, where):
    error = error_of(tmp_path, name)
    assert message in error.message
    line = f"#pragma annotune kernel {name} {LAUNCH}"
    assert column(error) == line.index(where) + 1


def test_a_function_that_is_no_template_takes_no_arguments(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "__global__ void k(float *a, int n) {}\n"
        "#pragma annotune kernel k<4> grid(1) block(BS) args(inout(n), 1)\n"
    )
    with pytest.raises(AnnotuneError, match="not a template") as caught:
        kernel_specs(parse_source(source), ("BS",))
    assert (caught.value.location.line, caught.value.location.column) == (2, 26)


def test_a_config_declares_a_template_kernel(tmp_path):
    (tmp_path / "k.cu").write_text(WITH_N)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.cu"\n[file.params]\nBS = "pow2(32, 256)"\n'
        '[[file.kernel]]\nname = "scale<float, BS>"\n'
        'grid = "(N + BS - 1) / BS"\nblock = "BS"\nargs = ["out(N)", "in(N)", "2.0", "N"]\n'
    )
    (spec,) = read_problem(tmp_path / "k.cu").kernels
    assert spec.instance({"BS": 64}) == "ns::scale<float, 64>"


def test_a_config_template_mistake_is_located_in_the_config(tmp_path):
    (tmp_path / "k.cu").write_text(WITH_N)
    config = (
        '[[file]]\npath = "k.cu"\n[file.params]\nBS = "pow2(32, 256)"\n'
        '[[file.kernel]]\nname = "scale<float, BS * XX>"\n'
        'grid = "1"\nblock = "BS"\nargs = ["out(N)", "in(N)", "2.0", "N"]\n'
    )
    (tmp_path / "annotune.toml").write_text(config)
    with pytest.raises(AnnotuneError, match="unknown name 'XX'") as caught:
        read_problem(tmp_path / "k.cu")
    where = caught.value.location
    line = config.splitlines()[5]
    assert where.file.endswith("annotune.toml") and where.line == 6
    assert where.column == line.index("XX") + 1


def test_a_name_of_the_code_passes_as_written(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "enum Kind { PLAIN, FAST };\n"
        "template <Kind K, int B> __global__ void k(float *a) {}\n"
        "#pragma annotune kernel k<FAST, BS> grid(1) block(BS) args(out(BS))\n"
    )
    (spec,) = kernel_specs(parse_source(source), ("BS",))
    assert spec.instance({"BS": 32}) == "k<FAST, 32>"


def test_parameters_that_do_not_depend_on_the_template_survive_headers_libclang_lacks(tmp_path):
    """cub's headers are not on libclang's path: its enumerator is unknown there, but the
    kernel's parameters are plain `int *`, so the declaration stands and NVRTC judges it."""
    source = tmp_path / "k.cu"
    source.write_text(
        "#include <cub/block/block_scan.cuh>\n"
        "template <int B, cub::BlockScanAlgorithm A> __global__ void k(const int *a, int *b) {}\n"
        "#pragma annotune kernel k<BS, cub::BLOCK_SCAN_RAKING> grid(1) block(BS) "
        "args(in(BS), out(BS))\n"
    )
    (spec,) = kernel_specs(parse_source(source), ("BS",))
    assert [a.dtype for a in spec.args] == ["int32", "int32"]
    assert spec.instance({"BS": 64}) == "k<64, cub::BLOCK_SCAN_RAKING>"


def test_a_knob_only_the_declaration_names_reaches_the_kernel_not_a_define(tmp_path):
    """`BT` is in no file: the kernel's declaration is its only way in. Kernel mode takes it;
    no `-DBT` is made of it, and a program tune, which could not change, is refused."""
    from annotune.annotate.problem import chosen_kernel, kernel_only_params
    from annotune.builder.variants import variant_source

    (tmp_path / "k.cu").write_text(WITH_N)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.cu"\n[file.params]\nBS = "pow2(32, 256)"\n'
        'BT = { domain = "values(64, 128)", default = 64 }\n'
        '[[file.kernel]]\nname = "scale<float, BT>"\n'
        'grid = "N / BT"\nblock = "BT"\nargs = ["out(N)", "in(N)", "2.0", "N"]\n'
    )
    problem = read_problem(tmp_path / "k.cu")
    assert kernel_only_params(problem) == {"BT"}
    variant = variant_source(problem, {"BS": 64, "BT": 128})
    assert variant.defines == ()  # BS is rewritten in a copy, BT is given to nothing
    assert b"#define BS 64" in variant.files["k.cu"]
    assert chosen_kernel(problem, "kernel", None).instance({"BT": 128}) == "ns::scale<float, 128>"
    with pytest.raises(AnnotuneError, match="'BT' reaches the code only through a declared"):
        chosen_kernel(problem, "program", None)

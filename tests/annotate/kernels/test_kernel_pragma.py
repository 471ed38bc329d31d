"""`#pragma annotune kernel`: clauses, the kernel's signature from libclang, launches, mistakes."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from annotune.annotate.kernels import KernelSpec, LaunchError, kernel_specs
from annotune.annotate.source import parse_source
from annotune.core.diagnostics import AnnotuneError

FIXTURE = Path(__file__).parents[2] / "data" / "kernel" / "jacobi.cu"
PARAMS = ("BLOCK_X", "BLOCK_Y")
KERNEL = "__global__ void k(const float *in, float *out, int n) { out[0] = in[0] * n; }\n"


@pytest.fixture(scope="module")
def fixture_specs() -> dict[str, KernelSpec]:
    return {spec.name: spec for spec in kernel_specs(parse_source(FIXTURE), PARAMS)}


def specs_of(tmp_path: Path, text: str, params=("B",), name: str = "k.cu"):
    source = tmp_path / name
    source.write_text(text)
    return kernel_specs(parse_source(source), params)


def error_of(tmp_path: Path, text: str, params=("B",), name: str = "k.cu") -> AnnotuneError:
    with pytest.raises(AnnotuneError) as caught:
        specs_of(tmp_path, text, params, name)
    return caught.value


def at(error: AnnotuneError, text: str, needle: str, line: int = 1) -> bool:
    """Whether the error points at the first `needle` on `line` of `text`."""
    column = text.splitlines()[line - 1].index(needle) + 1
    loc = error.location
    return loc is not None and (loc.line, loc.column) == (line, column)


# --- the fixture -----------------------------------------------------------------------------


def test_every_pragma_of_the_file_and_its_headers(fixture_specs):
    assert set(fixture_specs) == {"jacobi_step", "typed", "axpy"}
    jacobi, axpy = fixture_specs["jacobi_step"], fixture_specs["axpy"]
    assert (jacobi.location.file, jacobi.location.line) == (str(FIXTURE), 10)
    assert axpy.location.file.endswith("axpy.cuh") and axpy.location.line == 4


def test_signature_types_and_kinds(fixture_specs):
    jacobi = fixture_specs["jacobi_step"]
    assert [(a.name, a.kind, a.dtype, a.const) for a in jacobi.args] == [
        ("in", "in", "float32", True),
        ("out", "out", "float32", False),
        ("nx", "scalar", "int32", False),
        ("ny", "scalar", "int32", False),
    ]
    typed = fixture_specs["typed"]
    assert [a.dtype for a in typed.args] == [
        "float64", "int32", "uint32", "int64", "float16", "uint8", "float16", "int64",
    ]  # fmt: skip
    axpy = fixture_specs["axpy"]
    assert [(a.name, a.kind, a.dtype) for a in axpy.args] == [
        ("n", "scalar", "uint64"),  # size_t, although <cstddef> is not installed for libclang
        ("a", "scalar", "float32"),
        ("x", "in", "float64"),
        ("y", "inout", "float64"),
    ]


def test_mangled_names(fixture_specs):
    assert fixture_specs["jacobi_step"].mangled_name == "_Z11jacobi_stepPKfPfii"
    assert fixture_specs["axpy"].mangled_name == "_Z4axpymfPKdPd"
    assert fixture_specs["typed"].mangled_name == "typed"  # extern "C"


@pytest.mark.skipif(
    shutil.which("nvcc") is None or shutil.which("readelf") is None, reason="needs nvcc, readelf"
)
def test_mangled_names_are_the_cubins_symbols(fixture_specs, tmp_path):
    cubin = tmp_path / "jacobi.cubin"
    subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", str(FIXTURE), "-o", str(cubin)],
        check=True,
        capture_output=True,
    )
    symbols = subprocess.run(
        ["readelf", "-sW", str(cubin)], check=True, capture_output=True, text=True
    ).stdout
    functions = {line.split()[-1] for line in symbols.splitlines() if " FUNC " in line}
    assert {spec.mangled_name for spec in fixture_specs.values()} <= functions


def test_launch_geometry_follows_the_parameters(fixture_specs):
    jacobi = fixture_specs["jacobi_step"]
    launch = jacobi.launch({"BLOCK_X": 32, "BLOCK_Y": 4})
    assert (launch.grid, launch.block, launch.shared) == ((10, 50, 1), (32, 4, 1), 512)
    assert [(a.count, a.value) for a in launch.args] == [(60000, 0), (60000, 0), (0, 300), (0, 200)]
    launch = jacobi.launch({"BLOCK_X": 128, "BLOCK_Y": 8})
    assert (launch.grid, launch.block, launch.shared) == ((3, 25, 1), (128, 8, 1), 4096)
    # CELLS is defined before the NX and NY it uses: macros resolve in any order.
    assert [name for name, _ in jacobi.macros] == ["NX", "NY", "CELLS"]
    axpy = fixture_specs["axpy"].launch({"BLOCK_X": 8, "BLOCK_Y": 2})
    assert (axpy.grid, axpy.block) == ((625, 1, 1), (16, 1, 1))
    assert [(a.name, a.count, a.value) for a in axpy.args] == [
        ("n", 0, 10000),
        ("a", 0, 0.5),
        ("x", 10000, 0),
        ("y", 10000, 0),
    ]
    assert fixture_specs["axpy"].to_json()["args"][1] == {
        "name": "a",
        "kind": "scalar",
        "type": "float",
        "expr": "0.5",
    }


def test_launches_that_c_cannot_compute(tmp_path):
    (spec,) = specs_of(
        tmp_path,
        "#pragma annotune kernel k grid(64 / B) block(B - 4) args(in(B - 9), out(1), 2)\n" + KERNEL,
    )
    with pytest.raises(LaunchError, match="undefined"):
        spec.launch({"B": 0})
    with pytest.raises(LaunchError, match="block dimension 0"):
        spec.launch({"B": 4})
    with pytest.raises(LaunchError, match="negative"):
        spec.launch({"B": 8})
    assert spec.launch({"B": 16}).grid == (4, 1, 1)


def test_clauses_in_any_order_over_continued_lines(tmp_path):
    text = (
        "#define N 100\n"
        "#pragma annotune kernel k args(in(N), out(N), \\\n"
        "    N * 2) block(B) shared(B * 4) grid((N + B - 1) / B)\n" + KERNEL
    )
    (spec,) = specs_of(tmp_path, text)
    launch = spec.launch({"B": 32})
    assert (launch.grid, launch.block, launch.shared) == ((4, 1, 1), (32, 1, 1), 128)
    assert launch.args[2].value == 200
    assert (spec.args[2].location.line, spec.args[2].location.column) == (3, 5)


def test_no_kernel_pragma_parses_nothing_more(tmp_path):
    assert specs_of(tmp_path, KERNEL) == ()


# --- mistakes, located -------------------------------------------------------------------------


def test_unknown_kernel(tmp_path):
    text = "#pragma annotune kernel kk grid(1) block(B) args()\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message == "unknown kernel 'kk'" and at(error, text, "kk")
    assert "k" in error.hint


def test_kernel_that_is_not_global(tmp_path):
    text = "#pragma annotune kernel h grid(1) block(B) args(in(1))\nvoid h(float *x) {}\n"
    error = error_of(tmp_path, text)
    assert error.message == "'h' is not a __global__ function" and at(error, text, "h grid")


def test_template_and_overloaded_kernels(tmp_path):
    template = (
        "#pragma annotune kernel t grid(1) block(B) args(in(1))\n"
        "template <int N> __global__ void t(float *x) {}\n"
    )
    assert "template kernel" in error_of(tmp_path, template).message
    overloaded = (
        "#pragma annotune kernel o grid(1) block(B) args(in(1))\n"
        "__global__ void o(float *x) {}\n__global__ void o(int *x) {}\n"
    )
    assert "overloaded" in error_of(tmp_path, overloaded).message


def test_argument_count(tmp_path):
    text = "#pragma annotune kernel k grid(1) block(B) args(in(1), out(1))\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message == "kernel 'k' takes 3 arguments, args(...) gives 2"
    assert at(error, text, "args")
    missing = "#pragma annotune kernel k grid(1) block(B)\n" + KERNEL
    assert "gives 0" in error_of(tmp_path, missing).message


def test_pointer_kinds_on_scalars_and_scalars_for_pointers(tmp_path):
    text = "#pragma annotune kernel k grid(1) block(B) args(in(1), out(1), in(4))\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message == "'n' is a scalar (int): give its value, not in(...)"
    assert at(error, text, "in(4)") and "declared at" in error.hint
    text = "#pragma annotune kernel k grid(1) block(B) args(in(1), 7, 3)\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message.startswith("'out' is a pointer (float *)") and at(error, text, "7")
    text = "#pragma annotune kernel k grid(1) block(B) args(out(1), out(1), 3)\n" + KERNEL
    error = error_of(tmp_path, text)
    assert "points to const" in error.message and at(error, text, "out(1)")


def test_unknown_names_and_syntax_errors_point_into_the_expression(tmp_path):
    text = "#pragma annotune kernel k grid(1) block(B * NZ) args(in(1), out(1), 3)\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message == "unknown name 'NZ' (not a tunable parameter or a numeric macro)"
    assert at(error, text, "NZ")
    text = "#pragma annotune kernel k grid(1) block(B) args(in(1), out(2 +), 3)\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message == "syntax error: unexpected end of expression"
    assert error.location.column == text.index("+), 3") + 2  # the ')' ending the expression
    text = '#define NAME "text"\n#pragma annotune kernel k grid(NAME) block(B) args()\n' + KERNEL
    error = error_of(tmp_path, text)
    assert "unknown name 'NAME'" in error.message and at(error, text, "NAME)", 2)


def test_a_syntax_error_on_a_continuation_line(tmp_path):
    text = (
        "#pragma annotune kernel k grid(1) block(B) \\\n    args(in(1), out(1), 3 $ 4)\n" + KERNEL
    )
    error = error_of(tmp_path, text)
    assert "unexpected character '$'" in error.message and at(error, text, "$", 2)


@pytest.mark.parametrize(
    ("pragma", "message", "needle"),
    [
        ("k grid(1) block(B) launch(2) args()", "unknown clause 'launch'", "launch"),
        ("k grid(1) grid(2) block(B)", "duplicate clause 'grid'", "grid(2)"),
        ("k block(B) args()", "missing grid(...) in the kernel pragma", "k block"),
        ("k grid(1, 2, 3, 4) block(B)", "grid(...) takes 1 to 3 expressions, found 4", "grid"),
        ("k grid(1) block(B) args(in(1)", "unclosed '('", "("),
        ("k grid 1 block(B)", "expected '(' after 'grid'", "1"),
        ("k grid() block(B)", "grid(...) takes 1 to 3 expressions, found 0", "grid"),
        ("k grid(1) block(B) shared(1, 2) args()", "shared(...) takes one expression", "shared"),
        ("k grid(1) block(B) , args()", "expected a clause", ","),
        ("k grid(1) block(B) args(in(1), out(1), )", "empty expression", ", )"),
        ("k grid(dim3(1, 2, 3, 4)) block(B)", "grid(...) takes 1 to 3 expressions", "grid"),
        ("k grid(dim3(1) * 2) block(B)", "grid(...): nothing may follow dim3(...)", " * 2"),
        ("k grid(dim3(1, N)) block(B)", "unknown name 'N'", "N))"),
    ],
)
def test_clause_mistakes(tmp_path, pragma, message, needle):
    text = f"#pragma annotune kernel {pragma}\n" + KERNEL
    error = error_of(tmp_path, text)
    assert error.message.startswith(message)
    column = text.index(needle, len("#pragma annotune kernel")) + 1
    if needle == ", )":
        column += 2  # at the ')' that ends the empty argument
    if needle == "(":
        column = text.index("args(") + len("args(")
    assert (error.location.line, error.location.column) == (1, column)


def test_a_grid_or_block_may_be_written_as_the_dim3_the_launch_makes(tmp_path):
    text = "#pragma annotune kernel k grid(dim3(4, B / 2)) block(dim3 (B, 2)) args(in(1))\n"
    (spec,) = specs_of(tmp_path, text + "__global__ void k(const float *x) {}\n")
    launch = spec.launch({"B": 8})
    assert (launch.grid, launch.block) == ((4, 4, 1), (8, 2, 1))


def test_missing_name(tmp_path):
    error = error_of(tmp_path, "#pragma annotune kernel\n" + KERNEL)
    assert "needs the kernel's name" in error.message


def test_types_annotune_cannot_generate(tmp_path):
    text = (
        "struct list { float x; list *next; };\n"
        "#pragma annotune kernel v grid(1) block(B) args(in(1))\n"
        "__global__ void v(list *p) {}\n"
    )
    error = error_of(tmp_path, text)  # a struct holding a pointer: no data annotune can make
    assert "type 'list *'" in error.message and at(error, text, "in(1)", 2)
    text = "#pragma annotune kernel v grid(1) block(B) args(1)\n__global__ void v(float4 p) {}\n"
    error = error_of(tmp_path, text)  # a value: one number cannot say four lanes
    assert "type 'float4'" in error.message and "arrays of CUDA's vector types" in error.message


STRUCTS = """\
struct Particle { float pos[3]; float vel[3]; float mass; };
struct Mixed { char tag; double weight; short id[2]; };
struct Nested { Mixed parts[2]; int count; float4 where; };
struct WithPointer { float *data; int n; };
#pragma annotune kernel k grid(1) block(B) args(inout(8), in(4), out(2))
__global__ void k(Particle *p, const Mixed *m, Nested *n) {}
"""


def test_arrays_of_structs_of_numbers_are_laid_out_as_the_compiler_lays_them(tmp_path):
    import numpy as np

    (spec,) = specs_of(tmp_path, STRUCTS)
    particle, mixed, nested = (np.dtype(a.dtype) for a in spec.args)
    assert spec.args[0].dtype == "(3,)<f4,(3,)<f4,<f4" and particle.itemsize == 28
    assert spec.args[1].dtype == "i1,V7,<f8,(2,)<i2,V4" and mixed.itemsize == 24
    assert nested.itemsize == 80  # two Mixed, an int, padding, a float4 aligned to 16: g++'s
    assert [nested.fields[f][1] for f in nested.names if nested.fields[f][0].base.kind != "V"] == [
        0, 8, 16, 24, 32, 40, 48, 64, 68, 72, 76,
    ]  # fmt: skip
    text = STRUCTS.replace("Nested *n", "WithPointer *n")
    error = error_of(tmp_path, text)
    assert "type 'WithPointer *'" in error.message and "structs of numbers" in error.message
    derived = STRUCTS.replace(
        "struct WithPointer", "struct Derived : Particle { int k; };\nstruct W"
    )
    error = error_of(tmp_path, derived.replace("Nested *n", "Derived *n"))
    assert "type 'Derived *'" in error.message  # its base's numbers are no field of its own


VECTORS = """\
#pragma annotune kernel v grid(1) block(B) args(in(8), out(8), inout(2), in(3), out(5))
__global__ void v(const float4 *a, double2 *b, uchar3 *c, const int1 *d, ulonglong4 *e) {}
"""


def test_arrays_of_cudas_vector_types_are_arrays_of_their_lanes(tmp_path):
    (spec,) = specs_of(tmp_path, VECTORS)
    assert [a.dtype for a in spec.args] == [
        "(4,)float32", "(2,)float64", "(3,)uint8", "(1,)int32", "(4,)uint64",
    ]  # fmt: skip
    assert spec.mangled_name == "_Z1vPK6float4P7double2P6uchar3PK4int1P10ulonglong4"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_vector_kernels_mangled_name_is_nvccs(tmp_path):
    (spec,) = specs_of(tmp_path, VECTORS)
    cubin = tmp_path / "v.cubin"
    subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", str(tmp_path / "k.cu"), "-o", str(cubin)],
        check=True,
        capture_output=True,
    )
    symbols = subprocess.run(
        ["readelf", "-sW", str(cubin)], check=True, capture_output=True, text=True
    ).stdout
    assert spec.mangled_name in symbols
    text = (
        '#include "missing_types.h"\n'
        "#pragma annotune kernel v grid(1) block(B) args(in(1))\n"
        "__global__ void v(real_t *p) {}\n"
    )
    error = error_of(tmp_path, text)
    assert error.message.startswith("cannot tell the type of parameter 'p'")


def test_duplicate_pragma_and_non_cuda_source(tmp_path):
    pragma = "#pragma annotune kernel k grid(1) block(B) args(in(1), out(1), 3)\n"
    error = error_of(tmp_path, pragma + pragma + KERNEL)
    assert error.message == "duplicate kernel pragma for 'k'" and error.location.line == 2
    error = error_of(tmp_path, pragma + "void k(void) {}\n", name="k.c")
    assert error.message == "kernel mode needs a CUDA source (.cu)"


def test_pragma_in_a_local_header_is_located_there(tmp_path):
    (tmp_path / "k.cuh").write_text("#pragma annotune kernel k grid(1) block(B) args(in(1))\n")
    text = '#include "k.cuh"\n' + KERNEL
    error = error_of(tmp_path, text)
    assert error.location.file.endswith("k.cuh") and error.location.line == 1


def test_array_parameters_are_pointers_to_their_elements(tmp_path):
    """`double c[][NY][NX]` (HeCBench che-cuda) is a pointer to planes: in(...), out(...)
    count doubles; a const element makes it const."""
    text = (
        "#define NX 8\n#define NY 4\n"
        "#pragma annotune kernel k grid(1) block(B) args(out(NX * NY * 2), in(NX * NY * 2), 1.0)\n"
        "__global__ void k(double c[][NY][NX], const double d[][NY][NX], double a) {\n"
        "  c[0][threadIdx.y][threadIdx.x] = a * d[0][threadIdx.y][threadIdx.x];\n}\n"
    )
    (spec,) = specs_of(tmp_path, text)
    assert [(a.kind, a.dtype, a.const) for a in spec.args] == [
        ("out", "float64", False),
        ("in", "float64", True),
        ("scalar", "float64", False),
    ]
    assert spec.mangled_name == "_Z1kPA4_A8_dPA4_A8_Kdd"
    assert [a.count for a in spec.launch({"B": 32}).args[:2]] == [64, 64]
    error = error_of(tmp_path, text.replace("in(NX * NY * 2), 1.0", "out(NX * NY * 2), 1.0"))
    assert error.message.startswith("'d' points to const")

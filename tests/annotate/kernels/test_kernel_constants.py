"""Kernel mode and the host's `__constant__` memory and textures: the uninitialised
`__constant__` variables a kernel mode run must fill (the host would, with cudaMemcpyToSymbol),
their fill rules (`constants(NAME = RULE)`, in a pragma or a config), and the texture and
surface objects kernel mode cannot make, each mistake located."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate.config import load_file_config
from annotune.annotate.kernels import KernelSpec, LaunchConstant, kernel_specs
from annotune.annotate.source import parse_source
from annotune.core.diagnostics import AnnotuneError
from annotune.run.kernel import fill_notes

SOURCE = """\
#define B 32
#define N 16
#define R 8
__constant__ float coef[N];
__constant__ int lut[4] = {{1, 2, 3, 4}};
static __constant__ double sc[R][2];
namespace ns {{ __constant__ float nc[3]; static __constant__ int hidden[2]; }}
struct P {{ int a; float b; }};
__constant__ P params;
__constant__ unsigned char bytes[10];
__device__ float dev[4];
#pragma annotune kernel k grid(N / B + 1) block(B) args(out(N)) {clause}
__global__ void k(float *out) {{ out[threadIdx.x] = coef[threadIdx.x] + lut[0] + ns::nc[0]; }}
"""
RULES = "constants(coef = uniform(-1, 1), ns::nc = iota, sc = value(R + B))"


def spec_of(tmp_path: Path, clause: str = RULES, source: str = SOURCE) -> KernelSpec:
    path = tmp_path / "k.cu"
    path.write_text(source.format(clause=clause))
    (spec,) = kernel_specs(parse_source(path), ["B"])
    return spec


def test_the_uninitialised_constants_are_found_with_their_symbols_and_rules(tmp_path):
    spec = spec_of(tmp_path)
    found = {c.name: c for c in spec.constants}
    assert "lut" not in found  # initialised where declared: the cubin holds its values
    assert "dev" not in found  # __device__, not __constant__
    coef = found["coef"]
    assert (coef.symbol, coef.dtype, coef.count) == ("coef", "float32", 16)
    assert (found["sc"].symbol, found["sc"].count) == ("sc", 16)  # static: its plain name
    assert found["ns::nc"].symbol == "_ZN2ns2ncE" and found["bytes"].dtype == "uint8"
    assert "hash of the file" in found["ns::hidden"].why  # nvcc's name for it is unknowable
    assert "makes data only of" in found["params"].why
    assert (found["coef"].location.line, found["coef"].location.column) == (4, 20)
    launch = spec.launch({"B": 64})
    assert launch.constants == (
        LaunchConstant("bytes", "bytes", "uint8"),
        LaunchConstant("coef", "coef", "float32", ("uniform", (-1, 1))),
        LaunchConstant("ns::nc", "_ZN2ns2ncE", "float32", ("iota", ())),
        LaunchConstant("sc", "sc", "float64", ("value", (72,))),  # R + B, per configuration
    )
    assert spec.to_json()["constants"][1]["fill"] == {"rule": "uniform", "bounds": ["-1", "1"]}


def test_a_fill_bound_may_name_a_macro_no_other_clause_uses(tmp_path):
    source = SOURCE.replace("#define R 8", "#define M 5").replace("[R]", "[5]")
    spec = spec_of(tmp_path, "constants(coef = range(0, M))", source)
    assert spec.launch({"B": 32}).constants[1].fill == ("range", (0, 5))


def test_the_notes_say_what_is_filled_by_default_and_what_keeps_its_zeros(tmp_path):
    filled, *kept = fill_notes(spec_of(tmp_path))
    assert "bytes (unsigned char[10])" in filled and "coef" not in filled
    assert "constants(NAME = RULE)" in filled and "[0, 100)" in filled
    assert len(kept) == 2 and "ns::hidden" in kept[0] and "params (P, " in kept[1]
    assert fill_notes(spec_of(tmp_path, "", SOURCE.replace("__constant__", "__device__"))) == ()


@pytest.mark.parametrize(
    ("clause", "needle", "message"),
    [
        ("constants(cof = iota)", "cof", "unknown __constant__ variable 'cof'"),
        ("constants(dev = iota)", "dev", "'dev' is a __device__ variable"),
        ("constants(lut = iota)", "lut", "k.cu:5:18): the cubin holds its values"),
        ("constants(params = iota)", "params", "'params' cannot be filled: annotune makes data"),
        ("constants(coef = sorted)", "sorted", "unknown fill 'sorted'"),
        ("constants(coef = range(0))", "range", "'range' takes 2 bounds"),
        ("constants(coef = value(Q))", "Q", "unknown name 'Q'"),
        ("constants(coef)", "coef", "expected NAME = RULE in constants(...)"),
        ("constants(coef = iota, coef = iota)", "coef = iota)", "a second rule for"),
    ],
)
def test_a_bad_rule_is_an_error_where_it_is_written(tmp_path, clause, needle, message):
    with pytest.raises(AnnotuneError) as caught:
        spec_of(tmp_path, clause)
    assert message in caught.value.message
    line = SOURCE.format(clause=clause).splitlines()[11]
    assert caught.value.location is not None
    assert (caught.value.location.line, caught.value.location.column) == (
        12,
        line.index(needle, line.index("constants")) + 1,
    )


CONFIG = """\
[[file]]
path = "k.cu"
[file.params]
B = "pow2(32, 256)"
[[file.kernel]]
name = "k"
grid = "N / B + 1"
block = "B"
args = "out(N)"
constants = ["coef = uniform(-1, 1)", "ns::nc = {rule}"]
"""


def config_specs(tmp_path: Path, rule: str) -> tuple[KernelSpec, ...]:
    (tmp_path / "k.cu").write_text(SOURCE.format(clause="").replace("#pragma annotune", "//"))
    (tmp_path / "annotune.toml").write_text(CONFIG.format(rule=rule))
    declared = load_file_config(tmp_path / "annotune.toml", tmp_path / "k.cu")
    assert declared is not None
    return kernel_specs(parse_source(tmp_path / "k.cu"), ["B"], declared=declared.kernels)


def test_a_config_gives_the_rules_as_the_pragma_does_and_its_mistakes_are_located(tmp_path):
    (spec,) = config_specs(tmp_path, "iota")
    rules = {c.name: c.fill.rule for c in spec.constants if c.fill is not None}
    assert rules == {"coef": "uniform", "ns::nc": "iota"}
    with pytest.raises(AnnotuneError) as caught:
        config_specs(tmp_path, "range(0)")
    where = caught.value.location
    assert where is not None and where.file.endswith("annotune.toml")
    line = CONFIG.format(rule="range(0)").splitlines()[9]
    assert (where.line, where.column) == (10, line.index("range") + 1)
    assert "'range' takes 2 bounds" in caught.value.message


TEXTURED = """\
#define B 32
typedef cudaTextureObject_t tex_t;
#pragma annotune kernel k grid(1) block(B) args(out(B), 0, 0)
__global__ void k(float *out, int n, {param}) {{ }}
"""


@pytest.mark.parametrize(
    "param", ["cudaTextureObject_t tex", "const tex_t tex", "cudaSurfaceObject_t tex"]
)
def test_a_kernel_taking_a_texture_or_surface_object_is_an_error_at_its_declaration(
    tmp_path, param
):
    with pytest.raises(AnnotuneError) as caught:
        spec_of(tmp_path, "", TEXTURED.replace("{param}", param))
    error = caught.value
    kind = "cudaSurfaceObject_t" if "Surface" in param else "cudaTextureObject_t"
    assert f"kernel 'k' takes 'tex', a {kind}, which kernel mode cannot create" in error.message
    assert "--mode program" in error.hint
    line = TEXTURED.splitlines()[3].replace("{param}", param)
    assert error.location is not None
    assert (error.location.line, error.location.column) == (4, line.index("tex)") + 1)


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("texture<float, 1, cudaReadModeElementType> texRef;", "'texRef' is a texture reference"),
        ("__constant__ cudaTextureObject_t texs[2];", "'texs' holds a cudaTextureObject_t"),
    ],
)
def test_a_texture_reference_or_a_constant_texture_object_is_an_error(
    tmp_path, declaration, message
):
    source = "#define B 32\n" + declaration + "\n" + SOURCE.format(clause="").split("\n", 3)[3]
    with pytest.raises(AnnotuneError) as caught:
        spec_of(tmp_path, "", source.replace("{", "{{").replace("}", "}}"))
    assert message in caught.value.message and "--mode program" in caught.value.hint
    assert caught.value.location is not None and caught.value.location.line == 2

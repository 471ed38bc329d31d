"""The device code NVRTC compiles: user files with host code blanked, checked with real NVRTC."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import annotune.annotate as annotate
import annotune.annotate.device_code.spans as device_code_module
import annotune.annotate.kernels.specs as kernel_module
from annotune.annotate import read_problem
from annotune.annotate.device_code import (
    DEVICE_HEADERS,
    GLIBC_PRELUDE,
    NVRTC_PRELUDE,
    DeviceCode,
    device_code,
    is_device_header,
)
from annotune.annotate.source import ANNOTUNE_INCLUDE_DIR, ParsedSource, parse_source

nvrtc = pytest.importorskip(
    "cuda.bindings.nvrtc", reason="cuda-python's NVRTC bindings (cuda.bindings.nvrtc) missing"
)

REPO = Path(__file__).resolve().parents[3]
CONV2D = REPO / "examples" / "cuda" / "conv2d" / "conv2d.cu"
JACOBI = REPO / "tests" / "data" / "kernel" / "jacobi.cu"
CUDA_INCLUDE = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
PRELUDE_NAME = "annotune_nvrtc_prelude.h"
OK = nvrtc.nvrtcResult.NVRTC_SUCCESS


def nvrtc_compile(
    source: bytes,
    path: Path,
    *,
    prelude: bool = True,
    names: tuple[str, ...] = (),
    text: str = NVRTC_PRELUDE,
) -> tuple[bool, str, dict[str, str]]:
    """Compile `source` as the NVRTC builder does: sm_90, the prelude pre-included, -I the
    file's directory, annotune's include dir and the toolkit's. Returns whether it compiled,
    the log and the lowered name of each of `names` (kernels, as `&name` expressions)."""
    headers = [text.encode()] if prelude else []
    header_names = [PRELUDE_NAME.encode()] if prelude else []
    error, program = nvrtc.nvrtcCreateProgram(
        source, str(path).encode(), len(headers), headers, header_names
    )
    assert error == OK
    options = [
        b"--gpu-architecture=sm_90",
        f"-I{path.parent}".encode(),
        f"-I{ANNOTUNE_INCLUDE_DIR}".encode(),
        f"-I{CUDA_INCLUDE}".encode(),
        f"-I{CUDA_INCLUDE / 'cccl'}".encode(),
    ]
    if prelude:
        options.append(f"--pre-include={PRELUDE_NAME}".encode())
    try:
        for name in names:
            assert nvrtc.nvrtcAddNameExpression(program, f"&{name}".encode())[0] == OK
        (result,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
        _, size = nvrtc.nvrtcGetProgramLogSize(program)
        # A bytearray: NVRTC writes into the buffer, and `b" " * 1` is CPython's shared b" ".
        log = bytearray(size)
        nvrtc.nvrtcGetProgramLog(program, log)
        lowered = {}
        if result == OK:
            for name in names:
                error, symbol = nvrtc.nvrtcGetLoweredName(program, f"&{name}".encode())
                assert error == OK
                lowered[name] = symbol.decode()
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return result == OK, bytes(log).rstrip(b"\0 ").decode(errors="replace"), lowered


def sliced_tree(parsed: ParsedSource, code: DeviceCode, target: Path) -> Path:
    """Every user file, sliced, under `target` at its path relative to the files' common
    directory (so `#include "../common/x.cuh"` still resolves); returns the main file's copy."""
    paths = [os.path.abspath(f.path) for f in parsed.files]
    root = os.path.commonpath([os.path.dirname(p) for p in paths])
    for path in paths:
        copy = target / os.path.relpath(path, root)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(code.slice(path, Path(path).read_bytes()))
    return target / os.path.relpath(paths[0], root)


def assert_only_blanked(original: bytes, sliced: bytes) -> None:
    """Same lines, same lengths; each byte kept or a space: line and column numbers hold."""
    assert len(sliced) == len(original)
    assert sliced.count(b"\n") == original.count(b"\n")
    assert all(a == b or b == 0x20 for a, b in zip(original, sliced, strict=True))
    assert all(a == b for a, b in zip(original, sliced, strict=True) if a in b"\r\n")


# --- whole programs --------------------------------------------------------------------------


def test_conv2d_example_and_its_header_compile_sliced(tmp_path):
    parsed = parse_source(CONV2D)
    code = device_code(parsed)
    header = str(CONV2D.parent.parent / "common" / "example.cuh")
    assert set(code.spans) == {str(CONV2D), header}
    assert code.spans[header]  # its host helpers and <cstdio>

    main = sliced_tree(parsed, code, tmp_path)
    ok, log, _ = nvrtc_compile(main.read_bytes(), main)
    assert ok, log
    unsliced_ok, unsliced_log, _ = nvrtc_compile(CONV2D.read_bytes(), CONV2D)
    assert not unsliced_ok and "cannot open source file" in unsliced_log

    for path in code.spans:
        copy = tmp_path / os.path.relpath(path, CONV2D.parent.parent)
        assert_only_blanked(Path(path).read_bytes(), copy.read_bytes())
    sliced_header = (tmp_path / "common" / "example.cuh").read_text()
    assert "#define CUDA_CHECK(call)" in sliced_header  # macros stay
    assert "#include <cstdio>" not in sliced_header
    sliced_main = main.read_text()
    assert "__global__ void conv2d(" in sliced_main
    assert "int main()" not in sliced_main and "std::vector" not in sliced_main


def test_jacobi_fixture_compiles_sliced_with_the_kernels_symbols(tmp_path):
    problem, parsed = annotate.read_problem_and_source(JACOBI)
    code = problem.device_code
    assert code is not None
    assert set(code.spans) == {os.path.abspath(f) for f in problem.files}

    main = sliced_tree(parsed, code, tmp_path)
    names = tuple(spec.name for spec in problem.kernels)
    ok, log, lowered = nvrtc_compile(main.read_bytes(), main, names=names)
    assert ok, log
    # No 64-bit fixed-width type in these signatures (typed is extern "C"); size_t mangles
    # as libclang's.
    assert lowered == {spec.name: spec.mangled_name for spec in problem.kernels}
    assert not nvrtc_compile(JACOBI.read_bytes(), JACOBI)[0]
    sliced = main.read_text()
    assert "#include <cuda_fp16.h>" in sliced and "#include <cstdio>" not in sliced
    assert "host_only" not in sliced and "int main" not in sliced
    assert "#pragma annotune" not in sliced  # annotune's, and NVRTC would warn


def test_int64_kernel_symbol_under_nvrtc_is_libcudacxx_long_long(tmp_path):
    source = tmp_path / "wide.cu"
    source.write_text(
        "#include <cstdint>\n"
        "#define B 64 // @tune values(32, 64)\n"
        "#pragma annotune kernel wide grid(1) block(B) args(out(1), 1, 2, 3)\n"
        "__global__ void wide(int64_t *a, std::size_t n, uint64_t u, long long l) "
        "{ a[0] = n + u + l; }\n"
        "int main() { return 0; }\n"
    )
    problem = read_problem(source)
    text = problem.device_code.slice(str(source), source.read_bytes())
    ok, log, lowered = nvrtc_compile(text, source, names=("wide",))
    assert ok, log
    # int64_t is long long as libcu++ has it under NVRTC (x, y); nvcc's glibc has long (l, m),
    # which kernel mode's name follows: an NVRTC build takes the symbol NVRTC lowers.
    assert lowered["wide"] == "_Z4widePxmyx"
    assert problem.kernels[0].mangled_name == "_Z4widePlmmx"


# --- one construct each ----------------------------------------------------------------------

# name: (source, lines kept as written, texts gone from the slice)
CASES = {
    "define_in_host_function": (
        "#include <cstdio>\n"
        "void setup() {\n"
        '  std::printf("setup\\n");\n'
        "#define SCALE 3\n"
        "}\n"
        "__global__ void k(int *a) { a[0] = SCALE; }\n",
        ["#define SCALE 3", "__global__ void k(int *a) { a[0] = SCALE; }"],
        ["void setup", "printf", "#include <cstdio>"],
    ),
    "host_device_helper": (
        "__host__ __device__ int twice(int x) { return 2 * x; }\n"
        "int host_only(int x) { return twice(x); }\n"
        "__global__ void k(int *a) { a[0] = twice(a[0]); }\n",
        ["__host__ __device__ int twice(int x) { return 2 * x; }"],
        ["host_only"],
    ),
    "host_cache": (
        "#include <vector>\n"
        "static std::vector<int> cache;\n"
        "__global__ void k(int *a) { a[0] = 1; }\n"
        "int main() { cache.push_back(1); return 0; }\n",
        ["__global__ void k(int *a) { a[0] = 1; }"],
        ["cache", ";\n__global__"],
    ),
    "constants": (
        "const int N = 4;\n"
        "constexpr int M = 8;\n"
        "static const float W[2] = {0.5f, 0.25f};\n"
        'const char *const NAME = "k";\n'
        "int counter = 0;\n"
        "const int LATER = counter + 1;\n"
        "__global__ void k(float *a) { a[0] = N * M * W[1]; }\n",
        ["const int N = 4;", "constexpr int M = 8;", "static const float W[2] = {0.5f, 0.25f};"],
        ["counter", "LATER"],
    ),
    "template_host_function": (
        "template <typename T> T total(const T *v, int n) {\n"
        "  T s = 0;\n"
        "  for (int i = 0; i < n; ++i) s += v[i];\n"
        "  return s;\n"
        "}\n"
        "template <typename T> __device__ T square(T x) { return x * x; }\n"
        "__global__ void k(float *a) { a[0] = square(a[0]); }\n",
        ["template <typename T> __device__ T square(T x) { return x * x; }"],
        ["total", "s += v[i]"],
    ),
    "struct_with_host_method": (
        "struct Grid {\n"
        "  int nx, ny;\n"
        "  int cells() const { return nx * ny; }\n"
        "  __device__ int index(int x, int y) const { return y * nx + x; }\n"
        "};\n"
        "__global__ void k(Grid g, float *a) { a[g.index(1, 1)] = 1.0f; }\n"
        "int main() { Grid g{4, 4}; return g.cells(); }\n",
        ["struct Grid {", "  __device__ int index(int x, int y) const { return y * nx + x; }"],
        ["cells", "main"],
    ),
    "fp16_include": (
        "#include <cstdio>\n"
        "#include <cuda_fp16.h>\n"
        "__global__ void k(__half *a) { a[0] = __float2half(1.0f); }\n"
        'int main() { std::printf("k\\n"); return 0; }\n',
        ["#include <cuda_fp16.h>"],
        ["cstdio", "main"],
    ),
    "host_library_names": (
        "#include <string>\n"
        "#include <chrono>\n"
        'const std::string label = "k";\n'
        "using Clock = std::chrono::steady_clock;\n"
        "struct Timer {\n"
        "  std::chrono::steady_clock::time_point start;\n"
        "};\n"
        "typedef std::vector<float> Samples;\n"
        'extern "C" void report(double ms);\n'
        'extern "C" __global__ void k(int *a) { a[0] = 1; }\n',
        ['extern "C" __global__ void k(int *a) { a[0] = 1; }'],
        ["label", "Clock", "Timer", "time_point", "Samples", "report", '"k"'],
    ),
    # libclang reads a function whose parameter's type it lacks as a variable `fill` that
    # `(...)` initialises: the whole definition goes, its body too, and no further.
    "host_function_with_std_parameter": (
        "#include <vector>\n"
        "static void fill(std::vector<float> &values, int n) noexcept\n"
        "{\n"
        "  for (int i = 0; i < n; ++i) { values.push_back(0.5f * i); }\n"
        "}\n"
        "__global__ void k(float *a) { a[0] = 2.0f; }\n"
        "auto count(const std::vector<float> &values) -> int { return values.size(); }\n"
        "__device__ float twice(float x) { return 2.0f * x; }\n"
        "const int N = 4;\n",
        [
            "__global__ void k(float *a) { a[0] = 2.0f; }",
            "__device__ float twice(float x) { return 2.0f * x; }",
            "const int N = 4;",
        ],
        ["fill", "push_back", "{\n", "count", "size"],
    ),
    # ... and a function template's as a variable template.
    "host_template_with_std_parameter": (
        "#include <vector>\n"
        "template <typename T> constexpr T kHalf = T(1) / T(2);\n"
        "template <typename T>\n"
        "void release(std::vector<T *> &owned) {\n"
        "  for (T *p : owned) { delete p; }\n"
        "}\n"
        "__global__ void k(float *a) { a[0] = kHalf<float>; }\n",
        [
            "template <typename T> constexpr T kHalf = T(1) / T(2);",
            "__global__ void k(float *a) { a[0] = kHalf<float>; }",
        ],
        ["release", "delete"],
    ),
    # No cursor for an explicit instantiation: the one of a blanked template goes with it.
    "explicit_instantiation_of_host_template": (
        "#include <cstdio>\n"
        "template <typename T> T total(const T *v, int n) {\n"
        "  T s = 0;\n"
        "  for (int i = 0; i < n; ++i) s += v[i];\n"
        "  return s;\n"
        "}\n"
        "template float total<float>(const float *v, int n);\n"
        "extern template double total(const double *, int);\n"
        "template <typename T> __global__ void k(T *a) { a[0] = T(1); }\n"
        "template __global__ void k<float>(float *a);\n",
        [
            "template <typename T> __global__ void k(T *a) { a[0] = T(1); }",
            "template __global__ void k<float>(float *a);",
        ],
        ["total", "extern"],
    ),
    # `using namespace std;` stays (the prelude has a namespace std); what names the library's
    # host types through it goes.
    "host_names_after_using_namespace_std": (
        "#include <string>\n"
        "#include <map>\n"
        "#include <chrono>\n"
        "using namespace std;\n"
        "struct Setting {\n"
        "  string key;\n"
        "  int value;\n"
        "};\n"
        "typedef map<string, Setting> Settings;\n"
        "using Clock = chrono::steady_clock;\n"
        "__global__ void k(int *a) { a[0] = 1; }\n",
        ["using namespace std;", "__global__ void k(int *a) { a[0] = 1; }"],
        ["Setting", "Clock", "string"],
    ),
    # A class the kernel uses stays when only host members name the library; one whose
    # member type or field does goes whole (its layout would differ without the field).
    "class_with_host_members_naming_std": (
        "#include <iostream>\n"
        "#include <map>\n"
        "#include <string>\n"
        "struct Point {\n"
        "  float x;\n"
        "  __host__ __device__ float get() const { return x; }\n"
        '  std::string name() const { return "p"; }\n'
        "  friend std::ostream &operator<<(std::ostream &o, const Point &p) { return o << p.x; }\n"
        "  static std::string label;\n"
        "  void rename(const std::string &to);\n"
        "};\n"
        "struct Registry {\n"
        "  typedef std::map<int, Point> Table;\n"
        "  Table table;\n"
        "};\n"
        "__global__ void k(Point *p) { p->x = p->get(); }\n",
        ["struct Point {", "  float x;", "  __host__ __device__ float get() const { return x; }"],
        ["name", "ostream", "label", "rename", "Registry", "table"],
    ),
    # NVRTC includes the runtime headers before the first line, so it takes branches on their
    # guards (cuda-samples' helper_cuda.h): the parse must take them too, and blank them.
    "branch_on_a_runtime_header_guard": (
        "#include <cuda_runtime.h>\n"
        "#ifdef __DRIVER_TYPES_H__\n"
        "static const char *name_of(cudaError_t e) { return cudaGetErrorName(e); }\n"
        "#endif\n"
        "#if defined(__CUDA_RUNTIME_H__) && !defined(__CUDA_FP16_H__)\n"
        "inline void check(cudaError_t e) { if (e != cudaSuccess) cudaDeviceReset(); }\n"
        "#endif\n"
        "#ifndef __VECTOR_TYPES_H__\n"
        "struct float2 { float x, y; };\n"
        "#endif\n"
        "__global__ void k(float2 *x) { x[0].x = 1; }\n",
        ["#ifdef __DRIVER_TYPES_H__", "__global__ void k(float2 *x) { x[0].x = 1; }"],
        ["name_of", "check", "cudaDeviceReset"],
    ),
    # A class whose field's type only a system header has (cuda-samples' helper_timer.h), or
    # a typedef of such a type, that no device code names, is host code: it goes whole, and
    # so does what only such a declaration names.
    "unused_class_with_a_system_types_field": (
        "#include <sys/time.h>\n"
        "#include <pthread.h>\n"
        "class Clock {\n"
        "  struct timeval start;\n"
        " public:\n"
        "  void go() { gettimeofday(&start, 0); }\n"
        "  double ms() const;\n"
        "};\n"
        "double Clock::ms() const { return start.tv_sec * 1e3; }\n"
        "struct Stats { Clock clock; pthread_barrier_t *barrier; };\n"
        "typedef pthread_t Thread;\n"
        "typedef pid_t Process;\n"
        "int spawn(Process *p, Thread *t);\n"
        "struct Sample { float value; int count; };\n"
        "__global__ void k(Sample *s) { s[0].value = 1.0f; }\n"
        "void run() { Clock c; c.go(); }\n",
        [
            "struct Sample { float value; int count; };",
            "__global__ void k(Sample *s) { s[0].value = 1.0f; }",
        ],
        ["Clock", "timeval", "pthread", "Stats", "Thread", "Process", "pid_t", "spawn"],
    ),
    # libclang drops a specialization naming a type its shim lacks (float2): no cursor, but
    # its host template goes, so it must go too (NVRTC: "is_nan is not a template").
    "explicit_specialization_of_a_host_template": (
        "template <typename T> bool is_nan(T v) { return v != v; }\n"
        "template <> bool is_nan<float2>(float2 v) { return v.x != v.x; }\n"
        "template <>\n"
        "inline bool is_nan<double2>(double2 v)\n"
        "{\n"
        "  return v.x != v.x;\n"
        "}\n"
        "__global__ void k(float *x) { x[0] = 1; }\n",
        ["__global__ void k(float *x) { x[0] = 1; }"],
        ["is_nan", "return", "template"],
    ),
    # `X::` of a typedef the slice blanked (of a std:: type): what names it is host code too.
    "scope_of_a_blanked_typedef": (
        "#include <string>\n"
        "typedef std::string arg_string;\n"
        "class Arg {\n"
        " public:\n"
        "  using size_type = arg_string::size_type;\n"
        "  size_type pos;\n"
        "};\n"
        "typedef arg_string::size_type position;\n"
        "__global__ void k(float *x) { x[0] = 1; }\n",
        ["__global__ void k(float *x) { x[0] = 1; }"],
        ["arg_string", "Arg", "size_type", "position"],
    ),
    # libclang says only "expected class name" of a base in std: its `std::` says whose it is.
    "class_deriving_from_std": (
        "#include <exception>\n"
        "struct Failure : public std::exception {\n"
        "  int code;\n"
        "  Failure(int c) : code(c) {}\n"
        "};\n"
        "__global__ void k(int *a) { a[0] = 1; }\n",
        ["__global__ void k(int *a) { a[0] = 1; }"],
        ["Failure", "exception", "code"],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_construct_sliced_compiles_and_unsliced_does_not(tmp_path, name):
    text, kept, gone = CASES[name]
    source = tmp_path / "k.cu"
    source.write_text(text)
    code = device_code(parse_source(source))
    sliced = code.slice(str(source), source.read_bytes())

    assert_only_blanked(source.read_bytes(), sliced)
    lines = sliced.decode().split("\n")
    for line in kept:
        number = text.split("\n").index(line)
        assert lines[number] == line  # at its own line number
    for fragment in gone:
        assert fragment not in sliced.decode()
    ok, log, _ = nvrtc_compile(sliced, source)
    assert ok, log
    assert not nvrtc_compile(source.read_bytes(), source)[0]


def test_kernel_libclang_reads_as_a_variable_stays_for_nvrtc_to_report(tmp_path):
    """A kernel whose parameter's type libclang lacks reads as a variable, like a host
    function: it stays whole (NVRTC says why it cannot compile it), the host function goes."""
    source = tmp_path / "k.cu"
    source.write_text(
        "#include <vector>\n"
        "__global__ void k(std::vector<int> v) { }\n"
        "void host(std::vector<int> &v) { v.clear(); }\n"
    )
    sliced = device_code(parse_source(source)).slice(str(source), source.read_bytes())
    lines = sliced.decode().split("\n")
    assert lines[1] == "__global__ void k(std::vector<int> v) { }"
    assert lines[2].strip() == ""
    ok, log, _ = nvrtc_compile(sliced, source)
    assert not ok and f"{source}(2): error" in log and "vector" in log


def test_a_class_kernels_use_with_a_system_types_field_stays_for_nvrtc_to_report(tmp_path):
    """The kernels' layout needs every field: such a class stays whole, and NVRTC says what
    it lacks (the variant goes to nvcc); the unused one beside it goes."""
    source = tmp_path / "k.cu"
    source.write_text(
        "#include <sys/time.h>\n"
        "struct Stamped { struct timeval when; float x; };\n"
        "class Timer { struct timeval start; };\n"
        "__global__ void k(Stamped *s) { s->x = 1; }\n"
    )
    sliced = device_code(parse_source(source)).slice(str(source), source.read_bytes())
    lines = sliced.decode().split("\n")
    assert lines[1] == "struct Stamped { struct timeval when; float x; };"
    assert lines[2].strip() == ""
    ok, log, _ = nvrtc_compile(sliced, source)
    assert not ok and f"{source}(2): error" in log and "timeval" in log
    assert f"{source}(3)" not in log


def test_a_system_typedef_named_only_in_a_skipped_branch_goes(tmp_path):
    """cuda-samples' helper_multiprocess.h: the other platform's typedef of the same name, in
    a branch the compiler skips, names nothing NVRTC sees."""
    source = tmp_path / "k.cu"
    source.write_text(
        "#include <unistd.h>\n"
        "#if defined(_WIN32)\n"
        "typedef PROCESS_INFORMATION Process;\n"
        "#else\n"
        "typedef pid_t Process;\n"
        "#endif\n"
        "int spawnProcess(Process *process, const char *app);\n"
        "__global__ void k(float *x) { x[0] = 1; }\n"
    )
    sliced = device_code(parse_source(source)).slice(str(source), source.read_bytes())
    lines = sliced.decode().split("\n")
    assert lines[2] == "typedef PROCESS_INFORMATION Process;"
    assert lines[4].strip() == "" and lines[6].strip() == ""
    ok, log, _ = nvrtc_compile(sliced, source)
    assert ok, log


def test_a_class_naming_std_after_libclangs_twentieth_error_is_blanked(tmp_path):
    """Missing system headers spend clang's default limit of 20 errors first; the error that
    shows `std::vector` to be a host type comes later, and must still be seen."""
    source = tmp_path / "k.cu"
    source.write_text(
        "".join(f"#include <missing_{i}.h>\n" for i in range(24))
        + "struct Trace {\n  std::vector<float> samples;\n};\n"
        + "__global__ void k(int *a) { a[0] = 1; }\n"
    )
    sliced = device_code(parse_source(source)).slice(str(source), source.read_bytes())
    assert b"samples" not in sliced
    ok, log, _ = nvrtc_compile(sliced, source)
    assert ok, log


def test_nvrtc_reports_the_users_line_numbers(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "#include <cstdio>\n"
        "void host() {\n"
        '  std::printf("three lines\\n");\n'
        "}\n"
        "__global__ void k(int *a) {\n"
        "  a[0] = not_declared;\n"
        "}\n"
    )
    sliced = device_code(parse_source(source)).slice(str(source), source.read_bytes())
    ok, log, _ = nvrtc_compile(sliced, source)
    assert not ok
    assert f"{source}(6): error" in log and "not_declared" in log


def test_prelude_gives_fixed_width_types_and_namespace_std(tmp_path):
    source = tmp_path / "k.cu"
    text = (
        b"using namespace std;\n"
        b"__global__ void k(int64_t *a, uint32_t b, std::size_t n, std::uint8_t c) "
        b"{ a[0] = b + n + c; }\n"
    )
    ok, log, _ = nvrtc_compile(text, source)
    assert ok, log
    ok, log, _ = nvrtc_compile(text, source, prelude=False)
    assert not ok and "int64_t" in log


@pytest.mark.parametrize(
    ("prelude", "header"),
    [(GLIBC_PRELUDE, "cuda_runtime.h"), (NVRTC_PRELUDE, "cuda/std/cstdint")],
    ids=["glibc", "libcuxx"],
)
def test_prelude_gives_glibcs_uint_ushort_ulong(tmp_path, prelude, header):
    """<sys/types.h>'s names, which g++ reaches through <cstdlib> and device code uses; no
    toolkit header declares them again. A kernel taking them has nvcc's symbol."""
    text = (
        f"#include <{header}>\n__global__ void k(uint *a, ushort b, ulong c) {{ a[0] = b + c; }}\n"
    ).encode()
    ok, log, lowered = nvrtc_compile(text, tmp_path / "k.cu", names=("k",), text=prelude)
    assert ok, log
    assert lowered == {"k": "_Z1kPjtm"}  # unsigned int *, unsigned short, unsigned long


@pytest.mark.parametrize(
    ("prelude", "header", "wide"),
    [
        (GLIBC_PRELUDE, "cuda_runtime.h", "long"),
        (NVRTC_PRELUDE, "cuda/std/cstdint", "long long"),
        (NVRTC_PRELUDE, "cuda/std/climits", "long long"),
        (NVRTC_PRELUDE, "cooperative_groups.h", "long long"),
    ],
    ids=["glibc", "libcuxx-cstdint", "libcuxx-climits", "cooperative-groups"],
)
def test_prelude_gives_climits_and_cstdint_macros(tmp_path, prelude, header, wide):
    """<climits>'s and <cstdint>'s macros, whose includes the slice blanks: with the values
    and 64-bit types of the prelude's own types, and never redefined otherwise by libcu++
    (which defines them too under NVRTC, after the prelude)."""
    text = (
        f"#include <{header}>\n"
        "template <class A, class B> struct same { static const bool value = false; };\n"
        "template <class A> struct same<A, A> { static const bool value = true; };\n"
        "__global__ void k(int *a, uint64_t *b) {\n"
        "  a[0] = INT_MAX + INT_MIN + UINT16_MAX + CHAR_BIT + SCHAR_MIN + CHAR_MIN;\n"
        "  b[0] = UINT64_C(1) << 40 | UINT32_MAX | SIZE_MAX;\n"
        "}\n"
        'static_assert(INT_MAX == 2147483647 && INT32_MIN == -2147483647 - 1, "");\n'
        'static_assert(UINT32_MAX == 4294967295u && UINT64_MAX == ~0ull, "");\n'
        'static_assert(INT64_MIN < 0 && LLONG_MAX == 9223372036854775807ll, "");\n'
        f'static_assert(same<decltype(INT64_MAX), {wide}>::value, "");\n'
        'static_assert(same<decltype(INT32_MAX), int>::value, "");\n'
        f'static_assert(same<decltype(UINT64_C(1)), unsigned {wide}>::value, "");\n'
    ).encode()
    ok, log, _ = nvrtc_compile(text, tmp_path / "k.cu", text=prelude)
    assert ok, log
    assert "redefinition" not in log


def test_listed_device_headers_compile_under_nvrtc(tmp_path):
    present = sorted(h for h in DEVICE_HEADERS if (CUDA_INCLUDE / h).is_file())
    present += [
        h
        for h in ("cooperative_groups/reduce.h", "cuda/std/cstdint", "nv/target")
        if (CUDA_INCLUDE / h).is_file() or (CUDA_INCLUDE / "cccl" / h).is_file()
    ]
    assert "cuda_fp16.h" in present, f"no CUDA toolkit headers under {CUDA_INCLUDE}"
    assert all(is_device_header(h) for h in present)
    text = "".join(f"#include <{h}>\n" for h in present)
    ok, log, _ = nvrtc_compile(
        f"{text}__global__ void k(int *a) {{ a[0] = 1; }}\n".encode(), tmp_path / "k.cu"
    )
    assert ok, log


def test_is_device_header():
    assert is_device_header("cuda_bf16.h") and is_device_header("sm_61_intrinsics.h")
    assert is_device_header("cooperative_groups/reduce.h") and is_device_header("cuda/barrier")
    for host in ("cstdio", "vector", "cuda.h", "thrust/device_vector.h", "omp.h", "math.h"):
        assert not is_device_header(host)


# --- slicing text ----------------------------------------------------------------------------


def test_slice_applies_spans_by_line_to_a_rewritten_variant(tmp_path):
    source = tmp_path / "k.cu"
    source.write_text(
        "#ifndef BLOCK\n"
        "#define BLOCK 32\n"
        "#endif\n"
        "int host(int x) {\n"
        "#define LOCAL 1\n"
        "  return x * LOCAL; }\n"
        "__global__ void k(int *a) { a[0] = BLOCK * LOCAL; }\n"
    )
    code = device_code(parse_source(source))
    variant = (
        source.read_bytes().replace(b"BLOCK 32", b"BLOCK 1024").replace(b"LOCAL 1", b"LOCAL 77")
    )
    sliced = code.slice(str(source), variant).decode().split("\n")
    assert sliced[1] == "#define BLOCK 1024" and sliced[4] == "#define LOCAL 77"
    assert sliced[3].strip() == "" and sliced[5].strip() == ""
    assert sliced[6] == "__global__ void k(int *a) { a[0] = BLOCK * LOCAL; }"
    ok, log, _ = nvrtc_compile("\n".join(sliced).encode(), source)
    assert ok, log


def test_slice_keeps_crlf_and_leaves_other_files_alone(tmp_path):
    source = tmp_path / "k.cu"
    source.write_bytes(b"int host() { return 1; }\r\n__global__ void k(int *a) { a[0] = 1; }\r\n")
    code = device_code(parse_source(source))
    sliced = code.slice(str(source), source.read_bytes())
    assert sliced == b" " * 24 + b"\r\n__global__ void k(int *a) { a[0] = 1; }\r\n"
    other = b"int main() { return 0; }\n"
    assert code.slice(str(tmp_path / "other.cu"), other) is other

    clean = tmp_path / "clean.cu"
    clean.write_bytes(b"__global__ void k(int *a) { a[0] = 1; }\n")
    clean_code = device_code(parse_source(clean))
    assert clean_code.spans == {str(clean): ()}
    assert clean_code.slice(str(clean), clean.read_bytes()) == clean.read_bytes()


# --- on the problem --------------------------------------------------------------------------


def _count_parses(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = kernel_module.parse_cuda

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    for module in (annotate, kernel_module, device_code_module):
        monkeypatch.setattr(module, "parse_cuda", counted)
    return calls


def test_kernel_problem_parses_once_for_kernels_and_device_code(tmp_path, monkeypatch):
    calls = _count_parses(monkeypatch)
    problem = read_problem(JACOBI)
    assert problem.kernels and problem.device_code is not None
    assert len(calls) == 1


def test_problem_without_kernels_has_no_device_code_and_no_second_parse(tmp_path, monkeypatch):
    calls = _count_parses(monkeypatch)
    source = tmp_path / "program.cu"
    source.write_text(
        "#define B 32 // @tune values(32, 64)\n"
        "__global__ void k(int *a) { a[0] = B; }\n"
        "int main() { return 0; }\n"
    )
    problem = read_problem(source)
    assert problem.device_code is None and not problem.kernels
    assert calls == []


INT64_KERNEL = """\
#include <cstdint>
#include <vector>
__global__ void scale(float *x, int64_t n) { x[threadIdx.x] *= n; }
int main() { std::vector<float> x(4); return 0; }
"""


def test_without_libcuxx_int64_t_is_glibcs_and_the_kernel_has_nvccs_name(tmp_path):
    """NVRTC's libcu++ makes int64_t `long long` (`_Z5scalePfx`); nvcc and kernel mode have
    glibc's `long` (`_Z5scalePfl`), so such a kernel went to nvcc. Code that includes no
    libcu++ gets glibc's types, and NVRTC names the kernel as nvcc does."""
    path = tmp_path / "k.cu"
    path.write_text(INT64_KERNEL)
    parsed = parse_source(path)
    code = device_code(parsed)
    assert not code.libcuxx and code.prelude == GLIBC_PRELUDE
    sliced = code.slice(str(path), path.read_bytes())
    ok, log, lowered = nvrtc_compile(sliced, path, names=("scale",), text=code.prelude)
    assert ok, log
    assert lowered == {"scale": "_Z5scalePfl"}
    (spec,) = kernel_module.kernel_specs(
        parse_source(_with_pragma(tmp_path)), ["B"], translation_unit=None
    )
    assert spec.mangled_name == lowered["scale"]


def _with_pragma(tmp_path: Path) -> Path:
    path = tmp_path / "declared.cu"
    pragma = "#pragma annotune kernel scale grid(1) block(B) args(inout(B), 2)\n"
    path.write_text(pragma + INT64_KERNEL)
    return path


@pytest.mark.parametrize("header", ["cuda/std/cstdint", "cooperative_groups.h", "cuda_pipeline.h"])
def test_with_libcuxx_the_64_bit_types_are_its_own(tmp_path, header):
    path = tmp_path / "k.cu"
    path.write_text(f"#include <{header}>\n" + INT64_KERNEL)
    code = device_code(parse_source(path))
    assert code.libcuxx and code.prelude == NVRTC_PRELUDE
    ok, log, lowered = nvrtc_compile(
        code.slice(str(path), path.read_bytes()), path, names=("scale",)
    )
    assert ok, log
    assert lowered == {"scale": "_Z5scalePfx"}  # libcu++'s `long long`: the builder's fallback

"""Kernel mode's compiles given the compile command's flags: NVRTC's spellings of what it
understands, nvcc's cubin command made from the user's, and every fallback said and counted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import Builder, CompilerCommand
from annotune.builder.nvrtc import nvrtc_unavailable
from annotune.builder.nvrtc_flags import cubin_command, kernel_commands, nvrtc_flags

needs_nvrtc = pytest.mark.skipif(bool(nvrtc_unavailable()), reason=nvrtc_unavailable() or "-")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
SM90 = (9, 0)

# 24 floats live at once: ptxas gives it 32 registers, 24 under -maxrregcount=16 (nvcc's too).
HEAVY = """\
#ifndef BS
#define BS 128 // @tune values(64, 128)
#endif
#define N 4096
#pragma annotune kernel heavy grid(N / BS) block(BS) args(in(N), out(N), N)
__global__ void heavy(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a[24];
#pragma unroll
  for (int j = 0; j < 24; ++j) a[j] = in[(i + j * 37) % n] * (j + 1);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 24; ++j) s += a[j] * a[(j * 7) % 24];
#if MODE != 1
#error MODE must be 1
#endif
  out[i] = s;
}
"""


def test_flags_nvrtc_has_are_given_in_its_spelling_and_the_hosts_are_listed():
    argv = (
        "nvcc", "-O3", "-DMODE=1", "-U", "OLD", "-I", "inc", "-isystem", "/sys/inc",
        "-maxrregcount", "32", "-use_fast_math", "--expt-relaxed-constexpr", "-std=c++14",
        "-Xptxas", "-v,-dlcm=cg", "-arch=sm_80", "-Xcompiler", "-fopenmp", "main.cu", "-lm",
        "-lineinfo",
        "{includes}", "{defines}", "{source}", "-o", "{output}",
    )  # fmt: skip
    flags = nvrtc_flags(argv)
    assert flags.unknown == ""
    assert flags.options == (
        "-DMODE=1", "-UOLD", "--maxrregcount=32", "--use_fast_math", "--ptxas-options=-dlcm=cg",
        "--generate-line-info",
    )  # fmt: skip
    assert flags.std == "c++14"
    assert flags.includes[0].endswith("/inc") and Path(flags.includes[0]).is_absolute()
    assert flags.includes[1] == "/sys/inc"
    assert flags.host == (
        "-O3",
        "--expt-relaxed-constexpr",
        "-arch=sm_80",
        "-Xcompiler -fopenmp",
        "main.cu",
        "-lm",
    )  # fmt: skip: -lineinfo is nvcc's flag, not -l ineinfo
    said = flags.describe()
    assert "-std=c++14" in said and "-arch=sm_80" in said.partition("not given to NVRTC")[2]


@needs_nvrtc
def test_nvrtc_takes_every_option_it_is_given(tmp_path, monkeypatch):
    """Each NVRTC spelling the translation makes is one NVRTC 13 accepts (a refused option
    would send every variant to nvcc, whatever the code); -G is NVRTC's too, but ptxas
    refuses it beside -O1."""
    argv = (
        "nvcc", "-DA=1", "-UB", "-Iinc", "-include", "pre.h", "-std=c++20", "-maxrregcount=32",
        "-use_fast_math", "-ftz=true", "-prec-div=false", "-prec-sqrt=false", "-fmad=false",
        "-lineinfo", "-w", "-Xptxas", "-O1", "--expt-relaxed-constexpr", "--extended-lambda",
        "{source}", "-o", "{output}",
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pre.h").write_text("#define PRE 1\n")
    checks = "#if A != 1 || PRE != 1 || __cplusplus < 202002L\n#error flags\n#endif\n"
    (tmp_path / "k.cu").write_text(checks + HEAVY.replace("MODE != 1", "0"))
    problem = read_problem(tmp_path / "k.cu")
    with Builder(
        problem, compiler=CompilerCommand(argv), cache_dir=tmp_path / "c", nvrtc_arch=SM90
    ) as b:
        assert not b.nvrtc_unavailable
        (build,) = b.build([{"BS": 64}])
    assert build.ok and not build.fallback, build.error or build.fallback


@pytest.mark.parametrize(
    "flag", ["--foo-bar", "-imacros", "-maxrregcount", "-Xcompilerx", "@missing.rsp"], ids=str
)
def test_a_flag_nvrtc_cannot_be_given_is_named_as_the_reason(flag):
    argv = ("nvcc", "-DA=1", flag, *(("m.h",) if flag == "-imacros" else ()), "{source}")
    flags = nvrtc_flags(argv)
    assert flags.unknown.startswith(flag)
    assert flag in flags.refusal() and "nvcc compiles every variant" in flags.refusal()
    assert flags.options == ("-DA=1",)  # what a fallback of another compiler is given


def test_nvccs_cubin_command_keeps_the_users_flags_less_its_link_and_outputs():
    argv = (
        "nvcc", "-O3", "-DMODE=1", "-arch=sm_80", "-c", "main.cu", "other.o", "-L/lib", "-lfoo",
        "-maxrregcount=16", "{includes}", "{defines}", "{source}", "-o", "{output}",
    )  # fmt: skip
    assert cubin_command(argv, "sm_90") == (
        "nvcc", "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-O3", "-DMODE=1", "-maxrregcount=16",
        "{includes}", "{defines}", "{source}", "-o", "{output}",
    )  # fmt: skip


def test_response_files_are_read_and_another_compiler_falls_back_to_nvcc_with_its_flags(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.rsp").write_text("-DMODE=1 -std=c++20\n")
    user = CompilerCommand.parse("clang++ -x cuda @d.rsp {source} -o {output}")
    command, flags = kernel_commands(user, SM90)
    assert flags.options == ("-DMODE=1",) and flags.std == "c++20" and not flags.unknown
    assert command.argv[:3] == ("nvcc", "-cubin", "-arch=sm_90")
    assert "-DMODE=1" in command.argv and "-std=c++20" in command.argv
    preset, none = kernel_commands(CompilerCommand.parse("nvcc"), SM90)
    assert none.options == () and preset.argv[:2] == ("nvcc", "-cubin")


@pytest.fixture
def heavy(tmp_path):
    (tmp_path / "k.cu").write_text(HEAVY)
    return read_problem(tmp_path / "k.cu")


@needs_nvrtc
def test_nvrtc_compiles_with_the_commands_flags_as_nvcc_would(heavy, tmp_path):
    """Without the command's -DMODE=1 the kernel does not compile; with its -maxrregcount=16,
    NVRTC's cubin has nvcc's 24 registers, not the 32 of a compile without it."""
    user = CompilerCommand.parse("nvcc -O3 -DMODE=1 -maxrregcount=16 {source} -o {output}")
    with Builder(heavy, compiler=user, cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90) as b:
        (build,) = b.build([{"BS": 64}])
        identity = b.identity()
    assert build.ok and not build.fallback, build.error or build.fallback
    assert build.executable.read_bytes().startswith(b"\x7fELF")
    assert build.resources["_Z5heavyPKfPfi"].registers == 24
    assert identity.startswith("NVRTC ")
    assert "-DMODE=1 --maxrregcount=16" in identity and "-O3" in identity
    bare = CompilerCommand.parse("nvcc -DMODE=1 {source} -o {output}")
    with Builder(heavy, compiler=bare, cache_dir=tmp_path / "c", jobs=1, nvrtc_arch=SM90) as b:
        (build,) = b.build([{"BS": 64}])
    assert build.ok and build.resources["_Z5heavyPKfPfi"].registers == 32


@needs_nvrtc
@needs_nvcc
def test_a_flag_nvrtc_cannot_take_sends_every_variant_to_nvcc_each_saying_why(heavy, tmp_path):
    user = CompilerCommand.parse(
        "nvcc -DMODE=1 -maxrregcount=16 -Wno-deprecated-gpu-targets "
        "--extra-device-vectorization {source} -o {output}"
    )
    with Builder(heavy, compiler=user, cache_dir=tmp_path / "c", jobs=2, nvrtc_arch=SM90) as b:
        assert "--extra-device-vectorization" in b.nvrtc_unavailable
        builds = b.build([{"BS": 64}, {"BS": 128}])
        assert b.identity().startswith("nvcc -cubin -arch=sm_90 ")
    assert all(build.fallback == b.nvrtc_unavailable for build in builds)
    assert [build.resources["_Z5heavyPKfPfi"].registers for build in builds] == [24, 24]

"""`tune --compile-only` with the config's compile command: the language and `defines` the
front end read the source with are the compiler's too, and a user's nvcc command reports the
kernels' registers as the nvcc preset does. The nvcc tests skip where nvcc is not installed."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.builder import CompilerCommand
from annotune.session.compile_only import compile_configurations
from annotune.session.options import TuneArguments, TuneOptions, tune_options

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")

# HeCBench's halo-finder shape: a .cxx built with `nvcc -x cu`, its kernel under __CUDACC__.
CXX_KERNEL = """\
#ifdef __CUDACC__
#define BLOCKY 4
__global__ void tiled(float *x) {
  __shared__ float s[32 * BLOCKY];
  s[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  x[threadIdx.x] = s[32 * BLOCKY - 1 - threadIdx.x];
}
#endif
int main() { return 0; }
"""

# A stand-in compiler: logs each compile's -D flags (one line a compile), writes the output.
FAKE_COMPILER = (
    "import sys; args = sys.argv[2:]; "
    "open(sys.argv[1], 'a').write(' '.join(a for a in args if a.startswith('-D')) + '\\n'); "
    "open(args[args.index('-o') + 1], 'w').write('')"
)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@needs_nvcc
def test_a_users_nvcc_command_reports_registers_of_a_cxx_compiled_as_cuda(tmp_path):
    source = write(tmp_path / "RCBForceTree.cxx", CXX_KERNEL)
    write(
        tmp_path / "annotune.toml",
        """
        [[file]]
        path = "RCBForceTree.cxx"
        compile = "nvcc -O3 -x cu -c {source} -o {output}"
        [file.params]
        BLOCKY = "values(4, 8)"
        """,
    )
    problem = read_problem(source)
    assert problem.language == "cuda"
    options = tune_options(problem, TuneArguments(budget=2, jobs=2))
    report = compile_configurations(problem, replace(options, cache_dir=tmp_path / "cache"))
    assert (report.compiled, report.failed) == (2, 0) and report.warnings == ()
    assert report.command.startswith("nvcc -Xptxas -v -O3 -x cu ")
    (kernel,) = report.kernels
    assert kernel.kernel == "_Z5tiledPf" and kernel.shared_bytes == (32 * 4 * 4, 32 * 8 * 4)
    assert kernel.registers[0] > 0

    asking = CompilerCommand.parse("nvcc --resource-usage -x cu -c {source} -o {output}")
    options = replace(options, budget=1, compiler=asking, cache_dir=tmp_path / "cache")
    report = compile_configurations(problem, options)
    assert report.command.startswith("nvcc --resource-usage ") and len(report.kernels) == 1


def test_another_cuda_compiler_is_said_to_report_no_registers(tmp_path):
    source = write(tmp_path / "k.cu", "#ifndef B\n#define B 1 // @tune values(1, 2)\n#endif\n")
    command = CompilerCommand(
        (sys.executable, "-c", FAKE_COMPILER, str(tmp_path / "log"), "{source}", "-o", "{output}")
    )
    options = TuneOptions(budget=1, jobs=1, compiler=command, cache_dir=tmp_path / "cache")
    report = compile_configurations(read_problem(source), options)
    assert report.compiled == 1 and report.kernels == ()
    (warning,) = report.warnings
    assert f"runs {sys.executable}, not nvcc: no kernel's registers" in warning


def test_the_configs_defines_reach_every_variants_compile(tmp_path):
    source = write(
        tmp_path / "k.c",
        """\
        #ifndef A
        #define A 2 // @tune values(1, 2, 3)
        #endif
        int main(void) { return 0; }
        """,
    )
    log = tmp_path / "compiled.log"
    compile_argv = [sys.executable, "-c", FAKE_COMPILER, str(log), "{source}", "-o", "{output}"]
    write(
        tmp_path / "annotune.toml",
        f"""
        [[file]]
        path = "k.c"
        compile = {json.dumps(compile_argv)}
        defines = ["USE_FAST", "N=64"]
        """,
    )
    problem = read_problem(source)
    options = tune_options(problem, TuneArguments(budget=3, jobs=1))
    report = compile_configurations(problem, replace(options, cache_dir=tmp_path / "cache"))
    assert report.compiled == 3
    compiled = sorted(log.read_text().splitlines())
    assert compiled == [f"-DUSE_FAST -DN=64 -DA={a}" for a in (1, 2, 3)]

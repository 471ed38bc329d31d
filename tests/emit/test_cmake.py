"""annotune's CMake package with real CMake: the OpenACC matmul example built, run and rebuilt.

The build must recompile the target only when the tuned header it gets changes, and the header's
values must reach the compiler. Needs cmake and gcc (`.ci/run` installs cmake).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import annotune
from annotune.annotate import read_problem
from annotune.cli.app import CMAKE_DIR
from annotune.emit import render_header, tuned_header_path

ROOT = Path(__file__).parents[2]
MATMUL = ROOT / "examples" / "openacc" / "matmul"
DEVICE = "cmake-test-device"
BIN = Path(sys.executable).parent
DEFAULT = re.search(r"#define TILE_I (\d+)", (MATMUL / "matmul.c").read_text()).group(1)
FIRST, SECOND = [value for value in ("32", "64", "8") if value != DEFAULT][:2]
"""Tuned values of TILE_I that differ from the source's default and from each other."""
"""Where this environment's `annotune` command is: the build finds it on PATH."""

pytestmark = [
    pytest.mark.skipif(
        shutil.which("cmake") is None,
        reason="cmake is not installed (apt-get install cmake; .ci/run does it)",
    ),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed"),
]


def _env(**extra: str) -> dict[str, str]:
    assert (BIN / "annotune").is_file(), f"no annotune command in {BIN}"
    path = os.pathsep.join([str(BIN), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "ANNOTUNE_DEVICE": DEVICE, **extra}


def _run(*args: object, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _compiles(log: str) -> int:
    """How many times `cmake --build -v` compiled matmul.c."""
    return len(re.findall(r" -c \S*matmul\.c\b", log))


def _command(build: Path) -> tuple[list[str], Path]:
    """The command that compiles matmul.c, and where it runs (compile_commands.json)."""
    (entry,) = json.loads((build / "compile_commands.json").read_text())
    return shlex.split(entry["command"]), Path(entry["directory"])


def _macros(build: Path) -> str:
    """What the compiler defines when it compiles matmul.c as the build does (its command,
    preprocessing only): proof that the force-included header's values reach it."""
    command, directory = _command(build)
    args, kept = iter(command), []
    for arg in args:
        if arg in ("-o", "-MF", "-MT"):
            next(args)
        elif arg not in ("-c", "-MD"):
            kept.append(arg)
    return _run(*kept, "-E", "-dM", cwd=directory)


def _guide_block() -> str:
    text = (ROOT / "docs/guide/build.md").read_text()
    section = text[text.index("## With CMake") :]
    return re.search(r"```sh\n(.*?)```", section, re.DOTALL).group(1)


def _own_files() -> list[Path]:
    return sorted(p for p in MATMUL.rglob("*") if ".annotune" not in p.relative_to(MATMUL).parts)


def test_the_guide_example_builds_and_runs_from_the_repository_root(tmp_path):
    """The guide's commands as written, the build directory moved out of the checkout; the
    example's own files are left as they were (annotune's workspace beside them, `.annotune`,
    which git ignores, may gain `build`'s cache)."""
    script = _guide_block()
    assert "build/matmul" in script
    build = tmp_path / "build" / "matmul"
    before = _own_files()
    out = _run(
        "bash",
        "-euo",
        "pipefail",
        "-c",
        script.replace("build/matmul", shlex.quote(str(build))),
        cwd=ROOT,
        env=_env(CMAKE_EXPORT_COMPILE_COMMANDS="ON"),
    )
    assert re.search(r"^time_ms \d", out, re.MULTILINE), out
    assert re.search(r"^annotune-check: \S", out, re.MULTILINE), out  # annotune_INCLUDE_DIR
    header = build / "annotune" / "matmul.tuned.h"
    command, _ = _command(build)
    assert command[command.index("-include") + 1] == str(header)
    assert f"#define TILE_I {DEFAULT}" in _macros(build)  # no tuned header for this device
    assert _own_files() == before


GENERATORS = [
    "Unix Makefiles",
    pytest.param(
        "Ninja",
        marks=pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not installed"),
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("generator", GENERATORS)
def test_the_target_recompiles_only_when_its_tuned_header_changes(tmp_path, generator):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("matmul.c", "CMakeLists.txt"):
        shutil.copy(MATMUL / name, source / name)
    build = tmp_path / "build dir"  # a space: the -include option keeps the path one argument
    _run("cmake", "-S", source, "-B", build, "-G", generator, f"-Dannotune_DIR={CMAKE_DIR}",
         "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")  # fmt: skip
    obj = build / "CMakeFiles" / "matmul.dir" / "matmul.c.o"
    header = build / "annotune" / "matmul.tuned.h"

    def rebuild() -> int:
        return _compiles(_run("cmake", "--build", build, "-v"))

    assert rebuild() == 1
    assert f"#define TILE_I {DEFAULT}" in _macros(build)
    compiled = obj.stat().st_mtime_ns
    assert rebuild() == 0 and obj.stat().st_mtime_ns == compiled

    tuned = source / "tuned" / DEVICE / "matmul.h"  # committed after configuring: still seen
    tuned.parent.mkdir(parents=True)
    tuned.write_text(header.read_text().replace(f"TILE_I {DEFAULT}", f"TILE_I {FIRST}"))
    assert rebuild() == 1
    assert f"#define TILE_I {FIRST}" in header.read_text()
    assert f"#define TILE_I {FIRST}" in _macros(build)

    later = tuned.stat().st_mtime + 5  # re-tuned to the same values: the header stays
    os.utime(tuned, (later, later))
    assert rebuild() == 0

    tuned.write_text(tuned.read_text().replace(f"TILE_I {FIRST}", f"TILE_I {SECOND}"))
    os.utime(tuned, (later + 5, later + 5))  # after the touch, as a clock would have it
    assert rebuild() == 1
    assert f"#define TILE_I {SECOND}" in _macros(build)
    assert "time_ms" in _run(build / "matmul")


def _configure(tmp_path: Path, body: str, *args: str, env: dict[str, str] | None = None):
    (tmp_path / "m.c").write_text("int main(void) { return 0; }\n")
    (tmp_path / "CMakeLists.txt").write_text(
        f"cmake_minimum_required(VERSION 3.20)\nproject(t NONE)\n{body}\n"
    )
    return subprocess.run(
        ["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "build"), *args],
        env=env or _env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_device_and_output_choose_the_header_and_where_it_goes(tmp_path):
    """DEVICE wins over the device at hand ($ANNOTUNE_DEVICE here); OUTPUT is relative to the
    build directory. Only the header's step is built."""
    shutil.copy(MATMUL / "matmul.c", tmp_path / "matmul.c")
    tuned = tmp_path / "tuned" / "other-gpu" / "matmul.h"
    tuned.parent.mkdir(parents=True)
    tuned.write_text(f"#define TILE_I {FIRST}\n")
    body = (
        f"include({CMAKE_DIR}/annotuneConfig.cmake)\nadd_library(m OBJECT m.c)\n"
        "annotune_tuned_header(m SOURCE matmul.c DEVICE other-gpu OUTPUT headers/mm.h)"
    )
    done = _configure(tmp_path, body)
    assert done.returncode == 0, done.stderr
    _run("cmake", "--build", tmp_path / "build", "--target", "annotune_matmul")
    assert (tmp_path / "build" / "headers" / "mm.h").read_text() == tuned.read_text()


def test_find_package_takes_the_directory_and_checks_the_version(tmp_path):
    report = 'message(STATUS "annotune ${annotune_VERSION} found=${annotune_FOUND}")'
    found = _configure(
        tmp_path,
        f"find_package(annotune 0.1 CONFIG REQUIRED)\n{report}",
        f"-Dannotune_DIR={CMAKE_DIR}",
    )
    assert found.returncode == 0, found.stderr
    assert f"annotune {annotune.__version__} found=1" in found.stdout
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    assert f"ANNOTUNE_EXECUTABLE:FILEPATH={BIN / 'annotune'}" in cache
    for wanted in ("0.2", "1.0", "0.0...<0.1"):
        shutil.rmtree(tmp_path / "build")
        other = _configure(
            tmp_path,
            f"find_package(annotune {wanted} CONFIG)\n{report}",
            f"-Dannotune_DIR={CMAKE_DIR}",
        )
        assert other.returncode == 0 and "found=0" in other.stdout, wanted


def test_the_version_file_says_the_package_version():
    text = (CMAKE_DIR / "annotuneConfigVersion.cmake").read_text()
    assert f'set(PACKAGE_VERSION "{annotune.__version__}")' in text


INCLUDE = f"include({CMAKE_DIR}/annotuneConfig.cmake)\nadd_library(m OBJECT m.c)\n"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("annotune_tuned_header(m)", "SOURCE <file> is missing"),
        ("annotune_tuned_header(m SOURCE m.c DEVCE x)", "unknown argument 'DEVCE'"),
        ("annotune_tuned_header(m SOURCE)", "SOURCE needs a value"),
        ("annotune_tuned_header(SOURCE m.c)", "the target is missing"),
        ("annotune_tuned_header(n SOURCE m.c)", "'n' is not a target"),
        ("annotune_tuned_header(m SOURCE gone.c)", "gone.c is not a file"),
        (
            "add_library(n OBJECT m.c)\nannotune_tuned_header(m SOURCE m.c OUTPUT h.h)\n"
            "annotune_tuned_header(n SOURCE m.c OUTPUT h.h DEVICE other)",
            "already the tuned header of another source or device",
        ),
        (
            "annotune_tuned_header(m SOURCE m.c DEVICE x PER_ARCH)",
            "DEVICE and PER_ARCH exclude each other",
        ),
    ],
)
def test_bad_arguments_stop_the_configuration_with_a_clear_message(tmp_path, call, message):
    done = _configure(tmp_path, INCLUDE + call)
    assert done.returncode != 0
    assert message in " ".join(done.stderr.split()), done.stderr


def test_without_an_annotune_command_configuring_fails_with_the_way_out(tmp_path):
    """The module copied away from any Python environment, and no annotune on PATH."""
    module = tmp_path / "module"
    shutil.copytree(CMAKE_DIR, module)
    cmake_bin = str(Path(shutil.which("cmake")).parent)
    assert shutil.which("annotune", path=cmake_bin) is None
    env = {**_env(), "PATH": cmake_bin}
    project = tmp_path / "project"
    project.mkdir()
    required = _configure(
        project, "find_package(annotune CONFIG REQUIRED)", f"-Dannotune_DIR={module}", env=env
    )
    assert required.returncode != 0
    assert "no annotune command was found" in " ".join(required.stderr.split())
    shutil.rmtree(project / "build")
    included = _configure(
        project,
        f"include({module}/annotuneConfig.cmake)\nadd_library(m OBJECT m.c)\n"
        "annotune_tuned_header(m SOURCE m.c)",
        env=env,
    )
    assert included.returncode != 0
    assert "-DANNOTUNE_EXECUTABLE" in " ".join(included.stderr.split())


def _commit_tuned(source: Path, device: str, values: dict[str, int]) -> Path:
    """The tuned header a tune on `device` would commit beside `source`."""
    header = tuned_header_path(source, device)
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(
        render_header(
            read_problem(source),
            values,
            device=device,
            space_size=5,
            measurements=5,
            default_time=2.0,
            best_time=1.0,
            tool_version="t",
        )
    )
    return header


def test_per_arch_builds_one_header_with_every_gpus_values(tmp_path):
    """PER_ARCH runs `annotune build --per-arch`: the header chooses by __CUDA_ARCH__."""
    source = tmp_path / "k.cu"
    source.write_text(
        "#ifndef BX\n#define BX 32 // @tune values(32, 64, 128)\n#endif\n"
        "__global__ void k(float *a) { a[threadIdx.x] = BX; }\n"
    )
    for gpu, value in (("NVIDIA A100-PCIE-40GB", 64), ("NVIDIA H100 80GB HBM3", 128)):
        _commit_tuned(source, gpu, {"BX": value})
    body = INCLUDE + "annotune_tuned_header(m SOURCE k.cu PER_ARCH)"
    done = _configure(tmp_path, body)
    assert done.returncode == 0, done.stderr
    _run("cmake", "--build", tmp_path / "build", "--target", "annotune_k")
    text = (tmp_path / "build" / "annotune" / "k.tuned.h").read_text()
    assert "__CUDA_ARCH__" in text
    assert re.search(r"#define BX 64\b", text) and re.search(r"#define BX 128\b", text)


PROJECT = ROOT / "tests" / "realcode" / "project"
"""A vendored benchmark whose knob, TILE, is an unguarded #define in include/tinyconf.h."""

SMOOTH_CMAKE = """cmake_minimum_required(VERSION 3.20)
project(smooth LANGUAGES C)
find_package(annotune 0.1 CONFIG REQUIRED)
add_executable(smooth src/smooth.c)
target_include_directories(smooth PRIVATE include)
annotune_tuned_header(smooth SOURCE src/smooth.c {options})
"""


def _vendored(tmp_path: Path, options: str) -> tuple[Path, Path]:
    """A copy of the vendored project with a CMakeLists.txt of the user's, and its build dir."""
    project = tmp_path / "project"
    for part in ("src", "include", "data"):
        shutil.copytree(PROJECT / part, project / part)
    shutil.copy(PROJECT / "annotune.toml", project / "annotune.toml")
    (project / "CMakeLists.txt").write_text(SMOOTH_CMAKE.format(options=options))
    return project, tmp_path / "build"


def _smooth_compiles(log: str) -> int:
    return len(re.findall(r" -c \S*smooth\.c\b", log))


@pytest.mark.slow
@pytest.mark.parametrize("generator", GENERATORS)
def test_shadow_compiles_tuned_copies_of_code_you_must_not_edit(tmp_path, generator):
    """SHADOW: the unguarded TILE takes the tuned value through a copy of the source and its
    header; the vendored files stay as they were; the copy follows the tuned header and the
    originals, and a build with nothing changed compiles nothing."""
    project, build = _vendored(tmp_path, "SHADOW")
    vendored = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    _run("cmake", "-S", project, "-B", build, "-G", generator, f"-Dannotune_DIR={CMAKE_DIR}",
         "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON")  # fmt: skip

    def rebuild() -> int:
        return _smooth_compiles(_run("cmake", "--build", build, "-v"))

    assert rebuild() == 1
    command, _ = _command(build)
    compiled = Path(command[command.index("-c") + 1])
    assert compiled.name == "smooth.c" and build in compiled.parents  # the copy, not src/
    assert "#define TILE 8" in _macros(build)  # no tuned header yet: the default
    assert rebuild() == 0

    tuned = _commit_tuned(project / "src" / "smooth.c", DEVICE, {"TILE": 32})
    assert rebuild() == 1
    assert "#define TILE 32" in _macros(build)
    assert "kernel took" in _run(build / "smooth", "data/weights.txt", cwd=project)
    later = tuned.stat().st_mtime + 5  # re-tuned to the same values: nothing recompiles
    os.utime(tuned, (later, later))
    assert rebuild() == 0
    assert {p: p.read_bytes() for p in vendored} == vendored  # nothing vendored was touched

    conf = project / "include" / "tinyconf.h"  # the vendor's next release: the copy follows
    conf.write_text(conf.read_text().replace("#define TILE 8", "#define TILE 8\n#define EXTRA 5"))
    assert rebuild() == 1
    macros = _macros(build)
    assert "#define EXTRA 5" in macros and "#define TILE 32" in macros


def test_without_shadow_an_unguarded_tuned_define_fails_the_build_naming_shadow(tmp_path):
    """A force-included header cannot set an unguarded #define: the build stops at the define,
    and the way out it names is SHADOW."""
    project, build = _vendored(tmp_path, "")
    _commit_tuned(project / "src" / "smooth.c", DEVICE, {"TILE": 32})
    _run("cmake", "-S", project, "-B", build, f"-Dannotune_DIR={CMAKE_DIR}")
    done = subprocess.run(
        ["cmake", "--build", str(build)], env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())
    assert "tinyconf.h:6:9: error: TILE is tuned to 32" in said, said
    assert "SHADOW in CMake's annotune_tuned_header" in said


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("annotune_tuned_header(m SOURCE m.c SHADOW PER_ARCH)", "SHADOW and PER_ARCH exclude"),
        (
            "annotune_tuned_header(m SOURCE other.c SHADOW)",
            "other.c is not one of 'm''s sources",
        ),
    ],
)
def test_shadow_misuse_stops_the_configuration_with_a_clear_message(tmp_path, call, message):
    (tmp_path / "other.c").write_text("int other;\n")
    done = _configure(tmp_path, INCLUDE + call)
    assert done.returncode != 0
    assert message in " ".join(done.stderr.split()), done.stderr


@pytest.mark.slow
def test_check_tuning_is_a_ctest_test_that_fails_once_the_header_is_stale(tmp_path, data_dir):
    """annotune_check_tuning: `ctest` passes while the committed header holds, and fails
    naming the file changed since it was tuned (docs/guide/check.md)."""
    from annotune.session.provenance import tuned_from

    shutil.copytree(data_dir / "check", tmp_path / "src")
    source = tmp_path / "src" / "work.c"
    problem = read_problem(source)
    provenance = tuned_from(
        problem, {"WAY": 1}, device=DEVICE, compile_argv=("gcc", "{source}", "-o", "{output}"),
        mode="program", objective="time", speedup=None, interval=None,
    )  # fmt: skip
    text = render_header(problem, {"WAY": 1}, device=DEVICE, space_size=2, measurements=2,
                         default_time=2.0, best_time=1.0, tool_version="0.1.0",
                         provenance=provenance)  # fmt: skip
    header = tuned_header_path(source, DEVICE)
    header.parent.mkdir(parents=True)
    header.write_text(text)
    body = (
        f"include({CMAKE_DIR}/annotuneConfig.cmake)\nenable_testing()\n"
        "annotune_check_tuning(work-tuning SOURCE src/work.c)"
    )
    done = _configure(tmp_path, body)
    assert done.returncode == 0, done.stderr
    build = tmp_path / "build"
    assert "100% tests passed" in _run("ctest", "--output-on-failure", cwd=build)
    (tmp_path / "src" / "work.h").write_text("#define UNIT 1\n")
    failed = subprocess.run(
        ["ctest", "--output-on-failure"], cwd=build, env=_env(), capture_output=True, text=True
    )
    assert failed.returncode != 0
    assert "work.h changed since it was tuned" in failed.stdout

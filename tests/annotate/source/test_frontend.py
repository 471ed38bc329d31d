"""libclang front end: tokens, directives and functions, without CUDA or system headers."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from annotune.annotate.source import language_of, parse_source


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


@pytest.mark.parametrize(
    ("name", "language"),
    [("a.cu", "cuda"), ("a.cuh", "cuda"), ("a.c", "c"), ("a.h", "c++"), ("a.cpp", "c++")],
)
def test_language_by_suffix(name, language):
    assert language_of(Path(name)) == language


def test_directives_join_continuations_and_keep_their_comments(tmp_path):
    source = write(
        tmp_path,
        "d.c",
        """
        #include <stdlib.h>
        // about X
        #define X \\
            (4) /* trailing */
        int y = X;
        """,
    )
    parsed = parse_source(source)
    include, define = parsed.main.directives
    assert include.name == "include"
    assert define.name == "define"
    assert [w.text for w in define.words] == ["X", "(", "4", ")"]
    assert [c.text for c in define.comments] == ["// about X", "/* trailing */"]
    assert parsed.main.location(define.words[0].start).line == 3


@pytest.mark.parametrize("suffix", [".cu", ".cuh"])
def test_cuda_kernels_and_launches_parse_without_the_toolkit(tmp_path, suffix):
    source = write(
        tmp_path,
        "k" + suffix,
        """
        #include <cuda_runtime.h>
        __global__ void scale(float *x, float a) { x[blockIdx.x * blockDim.x + threadIdx.x] *= a; }
        __device__ float twice(float v) { return 2 * v; }
        void launch(float *x) { scale<<<dim3(4), dim3(128), 0>>>(x, 2.0f); }
        """,
    )
    parsed = parse_source(source)
    functions = {f.name: f.is_kernel for f in parsed.functions}
    assert functions == {"scale": True, "twice": False, "launch": False}
    assert "<<<" in [t.text for t in parsed.main.tokens]


def test_cpp_header_with_namespaces_and_methods(tmp_path):
    source = write(
        tmp_path,
        "m.h",
        """
        namespace tuned {
        struct Tile { int size() const { return 4; } };
        template <int N> int twice() { return 2 * N; }
        }
        """,
    )
    names = {f.name for f in parse_source(source).functions}
    assert names == {"size", "twice"}


def test_local_includes_are_followed_system_ones_are_not(tmp_path):
    (tmp_path / "a.h").write_text('#include "b.h"\n#define A 1\n')
    (tmp_path / "b.h").write_text("#define B 2\n")
    source = write(tmp_path, "m.c", '#include <stdio.h>\n#include "a.h"\n#include "missing.h"\n')
    parsed = parse_source(source)
    assert [Path(f.path).name for f in parsed.files] == ["m.c", "a.h", "b.h"]
    assert [name for _, name in parsed.missing_local_includes] == ["missing.h"]


def test_knows_whether_the_timing_header_is_included(tmp_path):
    write(tmp_path, "local.h", '#include "annotune_timing.h"\n')
    through_header = write(tmp_path, "a.c", '#include "local.h"\nint main(void) { return 0; }\n')
    without = write(tmp_path, "b.c", "#include <stdio.h>\nint main(void) { return 0; }\n")
    assert parse_source(through_header).timing_header
    assert not parse_source(without).timing_header


POLYBENCH_STYLE = """
#ifdef MINI_DATASET
#define N 32
#else
#define N 64
#endif
#if N > 40
int big[N];
#endif
"""


@pytest.mark.parametrize(("defines", "mini"), [([], False), (["MINI_DATASET"], True)])
def test_what_the_preprocessor_skips_is_inactive(tmp_path, defines, mini):
    parsed = parse_source(write(tmp_path, "p.c", POLYBENCH_STYLE), defines=defines)
    main = parsed.main
    defines_n = {d.words[1].text: d.words[0] for d in main.directives if d.name == "define"}
    assert main.is_active(defines_n["32"].start) is mini
    assert main.is_active(defines_n["64"].start) is not mini
    # The #if's condition was evaluated even where its branch is skipped.
    condition = next(d for d in main.directives if d.name == "if").words[0]
    assert main.is_active(condition.start)
    big = next(t for t in main.tokens if t.text == "big")
    assert parsed.is_active(main.location(big.start)) is not mini


def test_angle_bracket_headers_of_the_configured_include_directories_are_read(tmp_path):
    (tmp_path / "utilities").mkdir()
    (tmp_path / "utilities" / "polybench.h").write_text("#define P 1\n")
    source = write(tmp_path, "m.c", "#include <polybench.h>\n#include <stdio.h>\n")
    without = parse_source(source, include_dirs=[])
    with_dir = parse_source(source, include_dirs=[str(tmp_path / "utilities")])
    assert [Path(f.path).name for f in without.files] == ["m.c"]
    assert [Path(f.path).name for f in with_dir.files] == ["m.c", "polybench.h"]

"""`[[file.kernel]]`: a kernel declared in the config, for a source that must not be edited."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.annotate.config import load_file_config
from annotune.annotate.kernels import KernelSpec, kernel_specs
from annotune.annotate.source import parse_source
from annotune.core.diagnostics import AnnotuneError

THIRD_PARTY = """\
#include <cstdint>
#define N 4096
#define TILE 16
__global__ void scale(const float *in, float *out, int64_t n, float a) {
  int i = blockIdx.x * TILE + threadIdx.x;
  if (i < n) out[i] = a * in[i];
}
int main() { scale<<<N / TILE, TILE>>>(0, 0, N, 2.0f); }
"""

GOOD = """\
[[file]]
path = "scale.cu"
[file.params]
TILE = "pow2(16, 256)"
[[file.kernel]]
name = "scale"
grid = "(N + TILE - 1) / TILE"
block = "TILE"
args = ["in(N)", "out(N)", "N", "2.0"]
"""


def specs(tmp_path: Path, config: str, source: str = THIRD_PARTY) -> tuple[KernelSpec, ...]:
    (tmp_path / "scale.cu").write_text(source)
    (tmp_path / "annotune.toml").write_text(textwrap.dedent(config))
    declared = load_file_config(tmp_path / "annotune.toml", tmp_path / "scale.cu")
    assert declared is not None
    parsed = parse_source(tmp_path / "scale.cu")
    return kernel_specs(parsed, ["TILE"], declared=declared.kernels)


def error_of(tmp_path: Path, config: str, source: str = THIRD_PARTY) -> AnnotuneError:
    with pytest.raises(AnnotuneError) as caught:
        specs(tmp_path, config, source)
    return caught.value


def where(error: AnnotuneError, config: str, needle: str) -> tuple[int, int]:
    """(line, column) of the first `needle` in `config`, to compare with the error's."""
    for number, line in enumerate(config.splitlines(), 1):
        if needle in line:
            assert error.location is not None
            assert error.location.file.endswith("annotune.toml")
            return number, line.index(needle) + 1
    raise AssertionError(needle)


def located(error: AnnotuneError) -> tuple[int, int]:
    assert error.location is not None
    return error.location.line, error.location.column


def test_a_config_declares_what_the_pragma_would(tmp_path):
    (spec,) = specs(tmp_path, GOOD)
    assert spec.name == "scale"
    assert [(a.name, a.kind, a.dtype) for a in spec.args] == [
        ("in", "in", "float32"),
        ("out", "out", "float32"),
        ("n", "scalar", "int64"),
        ("a", "scalar", "float32"),
    ]
    assert spec.mangled_name == "_Z5scalePKfPflf"
    launch = spec.launch({"TILE": 64})
    assert (launch.grid, launch.block) == ((64, 1, 1), (64, 1, 1))
    assert [(a.count, a.value) for a in launch.args] == [(4096, 0), (4096, 0), (0, 4096), (0, 2.0)]
    assert (spec.location.line, spec.location.column) == where(
        AnnotuneError("", spec.location), GOOD, 'scale"'
    )


def test_args_as_one_string_as_between_the_pragmas_parentheses(tmp_path):
    config = GOOD.replace('["in(N)", "out(N)", "N", "2.0"]', '"in(N), out(N), N, 2.0"')
    (spec,) = specs(tmp_path, config)
    assert [a.kind for a in spec.args] == ["in", "out", "scalar", "scalar"]


def test_a_pragma_and_a_config_may_not_declare_one_kernel_twice(tmp_path):
    source = "#pragma annotune kernel scale grid(1) block(TILE) args(in(1), out(1), 1, 1)\n"
    error = error_of(tmp_path, GOOD, source + THIRD_PARTY)
    assert error.message == "duplicate [[file.kernel]] for 'scale'"
    assert "scale.cu:1:" in (error.hint or "")


@pytest.mark.parametrize(
    ("old", "new", "message", "needle"),
    [
        ('"(N + TILE - 1) / TILE"', '"(N + TILES - 1) / TILE"', "unknown name 'TILES'", "TILES"),
        ('"(N + TILE - 1) / TILE"', '"(N + TILE - 1) / * TILE"', "syntax error", "* TILE"),
        ('"TILE"', '"TILE))"', "unbalanced ')'", "))"),
        ('"TILE"', '"TILE, 1, 1, 1"', "block(...) takes 1 to 3", "TILE, 1"),
        ('"in(N)", "out(N)"', '"N", "out(N)"', "'in' is a pointer", '"N", "out'),
        ('"in(N)", "out(N)"', '"in(N)", "in(N) * 2"', "unexpected text after in(...)", "* 2"),
        ('"N", "2.0"]', '"out(N)", "2.0"]', "'n' is a scalar", 'out(N)", "2.0'),
        ('"N", "2.0"]', '"N"]', "kernel 'scale' takes 4 arguments, args(...) gives 3", "in(N)"),
        ('name = "scale"', 'name = "scaled"', "unknown kernel 'scaled'", "scaled"),
        ('name = "scale"', 'name = "2scale"', 'each [[file.kernel]] needs name = "KERNEL"', "2sc"),
        ('block = "TILE"', "block = 17", "'block' must be a string", "17"),
        ('block = "TILE"', 'blocks = "TILE"', "unknown key 'blocks' in [[file.kernel]]", "blocks"),
        ('block = "TILE"\n', "", "missing block(...) in the [[file.kernel]]", 'scale"'),
    ],
)
def test_mistakes_are_located_in_the_config(tmp_path, old, new, message, needle):
    assert old in GOOD
    config = GOOD.replace(old, new)
    error = error_of(tmp_path, config)
    assert message in error.message
    offset = 1 if needle.startswith('"') else 0  # a list element: the string's first character
    line, column = where(error, config, needle)
    assert located(error) == (line, column + offset)


def test_a_kernel_of_a_c_source_is_refused_at_the_config(tmp_path):
    (tmp_path / "scale.c").write_text("int main(void) { return 0; }\n")
    config = GOOD.replace("scale.cu", "scale.c")
    (tmp_path / "annotune.toml").write_text(config)
    declared = load_file_config(tmp_path / "annotune.toml", tmp_path / "scale.c")
    assert declared is not None
    with pytest.raises(AnnotuneError, match="needs a CUDA source") as caught:
        kernel_specs(parse_source(tmp_path / "scale.c"), ["TILE"], declared=declared.kernels)
    assert located(caught.value) == where(caught.value, config, 'scale"')


def test_read_problem_takes_the_configs_kernels_and_their_device_code(tmp_path):
    """A source with no pragma, its kernel declared in the config alone: kernel mode's problem.
    (Needs `read_problem` to pass the config's kernels to `kernel_specs`, issue 36.)"""
    (tmp_path / "scale.cu").write_text(THIRD_PARTY)
    (tmp_path / "annotune.toml").write_text(GOOD)
    problem = read_problem(tmp_path / "scale.cu")
    assert [k.name for k in problem.kernels] == ["scale"]
    assert problem.device_code is not None  # NVRTC compiles it: main() is blanked
    assert problem.device_code.spans[str(tmp_path / "scale.cu")]

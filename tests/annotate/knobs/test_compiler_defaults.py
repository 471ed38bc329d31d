"""The default is what the compiler sees (issue 46.5): the compile command's own `-D` (in a
response file too), and every `#undef` and `#define` in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotune.annotate import read_problem
from annotune.core.diagnostics import AnnotuneError

GUARDED = "#ifndef B\n#define B 4\n#endif\nint main(void) { return B; }\n"


def project(tmp_path: Path, source: str, entry: str = "", params: str = 'B = "pow2(1, 16)"'):
    path = tmp_path / "k.c"
    path.write_text(source)
    (tmp_path / "annotune.toml").write_text(
        f'[[file]]\npath = "k.c"\n{entry}\n[file.params]\n{params}\n'
    )
    return path


def default(path: Path) -> int:
    (param,) = read_problem(path).params
    return param.default


@pytest.mark.parametrize(
    "entry",
    [
        'compile = "gcc -DB=8 {source} -o {output}"',
        'compile = ["gcc", "-D", "B=8", "{source}", "-o", "{output}"]',
        'compile = "gcc -DB=2 -UB -DB=8 {source} -o {output}"',  # the last flag decides
        'compile = "gcc @flags.rsp {source} -o {output}"',  # a response file beside the config
    ],
)
def test_the_compile_commands_define_is_the_default(tmp_path, entry):
    (tmp_path / "flags.rsp").write_text("-DB=8\n")
    assert default(project(tmp_path, GUARDED, entry)) == 8


def test_an_annotated_macro_the_command_sets_has_the_commands_value(tmp_path):
    source = "#ifndef B\n// @tune pow2(1, 16)\n#define B 4\n#endif\nint main(void) { return B; }\n"
    path = tmp_path / "k.c"
    path.write_text(source)
    (tmp_path / "annotune.toml").write_text(
        '[[file]]\npath = "k.c"\ncompile = "gcc -DB=8 {source} -o {output}"\n'
    )
    assert default(path) == 8


def test_a_config_default_other_than_the_commands_is_an_error(tmp_path):
    path = project(
        tmp_path,
        GUARDED,
        'compile = "gcc -DB=8 {source} -o {output}"',
        'B = { domain = "pow2(1, 16)", default = 4 }',
    )
    with pytest.raises(AnnotuneError, match="compile command sets -DB=8"):
        read_problem(path)


def test_a_redefinition_after_an_undef_is_the_default(tmp_path):
    source = "#define B 4\n#undef B\n#define B 8\nint main(void) { return B; }\n"
    assert default(project(tmp_path, source)) == 8


def test_a_hygienic_undef_at_the_end_keeps_the_definition_before_it(tmp_path):
    source = "#define B 4\nint g(void) { return B; }\n#undef B\nint main(void) { return g(); }\n"
    assert default(project(tmp_path, source)) == 4

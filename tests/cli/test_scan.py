"""`annotune scan`: the golden JSON of a .cu whose tunables live in a .cuh, and every error case."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


def test_scan_json_of_cu_with_tunables_in_a_header(cli, data_dir):
    source = data_dir / "stencil" / "stencil.cu"
    header = str(data_dir / "stencil" / "stencil.cuh")
    report = cli.json("scan", source, "--json")

    assert report["file"] == str(source)
    assert report["space"] == {"cartesian": 60, "legal": 42}
    params = {p["name"]: p for p in report["params"]}
    assert list(params) == ["BLOCK_X", "BLOCK_Y", "UNROLL"]

    block_x = params["BLOCK_X"]
    assert block_x["values"] == [8, 16, 32, 64, 128, 256]
    assert block_x["default"] == 32
    assert block_x["origin"] == "define"
    assert block_x["guarded"] is True
    assert block_x["location"] == {"file": header, "line": 5, "column": 9}

    block_y = params["BLOCK_Y"]
    assert block_y["values"] == [1, 2, 4, 8, 16]
    assert block_y["default"] == 4
    assert block_y["guarded"] is False
    assert block_y["location"] == {"file": header, "line": 8, "column": 9}

    unroll = params["UNROLL"]
    assert unroll["values"] == [1, 3]
    assert unroll["default"] == 3
    assert unroll["origin"] == "literal"
    assert unroll["guarded"] is False
    assert unroll["location"] == {"file": str(source), "line": 12, "column": 16}

    (constraint,) = report["constraints"]
    assert constraint["expr"] == "BLOCK_X * BLOCK_Y <= 1024 && BLOCK_X * BLOCK_Y >= 64"
    assert constraint["location"] == {"file": str(source), "line": 5, "column": 29}
    assert report["warnings"] == []


def test_scan_reports_where_parameters_are_used(cli, data_dir):
    report = cli.json("scan", data_dir / "stencil" / "stencil.cu", "--json")
    uses = {p["name"]: p["uses"] for p in report["params"]}
    kinds_x = {(u["kind"], u.get("function")) for u in uses["BLOCK_X"]}
    assert ("launch", "main") in kinds_x  # dim3 block(BLOCK_X, BLOCK_Y)
    assert ("code", "smooth") in kinds_x
    assert ("macro", None) in kinds_x  # THREADS
    kernel_use = next(u for u in uses["BLOCK_X"] if u.get("function") == "smooth")
    assert kernel_use["kernel"] is True
    assert any(u["kind"] == "pragma" for u in uses["UNROLL"])


def test_scan_table_is_readable(cli, data_dir):
    result = cli("scan", data_dir / "stencil" / "stencil.cu")
    assert result.exit_code == 0
    assert "BLOCK_X" in result.stdout and "42 legal" in result.stdout
    assert "BLOCK_Y, UNROLL cannot be set with -D" in " ".join(result.stderr.split())


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


SKIPPED_USE = """
#define TILE 16 // @tune pow2(4, 64)
#define WIDTH 8 // @tune values(4, 8)
#define SPARE 1 // @tune values(1, 2)
#ifdef USE_TILING
int tiles[TILE];
#endif
int main(void) { return WIDTH; }
"""


def test_scan_warns_about_tunables_no_active_code_uses(cli, tmp_path):
    source = write(tmp_path, "k.c", SKIPPED_USE)
    result = cli("scan", source, "--json")
    assert result.exit_code == 0, result.stderr
    warnings = json.loads(result.stdout)["warnings"]
    assert [(w["location"]["line"], w["location"]["column"]) for w in warnings] == [(1, 9), (3, 9)]
    tile, spare = (w["message"] for w in warnings)
    assert tile.startswith("'TILE' is not used in active code (every use is in an #if branch")
    assert spare.startswith("'SPARE' is not used in active code (no use")
    stderr = " ".join(result.stderr.split())
    assert f"{source}:1:9: warning: 'TILE' is not used in active code" in stderr
    assert "'WIDTH'" not in stderr


def test_the_defines_of_the_configured_compile_decide_what_is_active(cli, tmp_path):
    source = write(tmp_path, "k.c", SKIPPED_USE)
    write(
        tmp_path,
        "annotune.toml",
        """
        [[file]]
        path = "k.c"
        compile = "gcc -O2 -DUSE_TILING {source} -o {output}"
        """,
    )
    warnings = cli.json("scan", source, "--json")["warnings"]
    assert [w["message"].split()[0] for w in warnings] == ["'SPARE'"]


ERROR_CASES = {
    "malformed annotation": (
        "#define A 4 // @tune values(1, 2, 4\n",
        "1:36",
        "expected ',' or ')'",
    ),
    "unknown domain": ("#define A 4 // @tune between(1, 8)\n", "1:22", "unknown domain"),
    "unknown parameter in constraint": (
        "#define A 4 // @tune values(1, 2, 4)\n#pragma annotune constraint A * B < 8\n",
        "2:33",
        "unknown parameter 'B'",
    ),
    "empty domain": ("#define A 4 // @tune values()\n", "1:22", "empty domain"),
    "inconsistent domain": ("#define A 4 // @tune range(8, 1)\n", "1:28", "lo > hi"),
    "default outside domain": (
        "#define A 5 // @tune values(1, 2, 4)\n",
        "1:11",
        "default value 5 of 'A' is not in its domain",
    ),
    "duplicate parameter": (
        "#define A 4 // @tune values(1, 2, 4)\n#pragma annotune param A values(4, 8)\n",
        "2:24",
        "duplicate parameter 'A'",
    ),
    "constraint leaves nothing": (
        "#define A 4 // @tune values(1, 2, 4)\n#pragma annotune constraint A > 4\n",
        "2:29",
        "leaves no legal configuration",
    ),
    "unparsable expression": (
        "#define A 4 // @tune values(1, 2, 4)\n#pragma annotune constraint A * (2 +\n",
        "2:37",
        "syntax error",
    ),
    "constraint calls something": (
        "#define A 4 // @tune values(1, 2, 4)\n#pragma annotune constraint __import__(A) > 0\n",
        "2:29",
        "syntax error",
    ),
    "attribute access": (
        "#define A 4 // @tune values(1, 2, 4)\n#pragma annotune constraint A.real > 0\n",
        "2:30",
        "syntax error",
    ),
    "annotation on code": ("int a = 4; // @tune values(1, 4)\n", "1:15", "#define or #pragma"),
    "pragma literal without a name": (
        "#pragma unroll 4 // @tune values(1, 4)\n",
        "1:21",
        "@tune(NAME)",
    ),
    "non-numeric define": ("#define A foo // @tune values(1, 4)\n", "1:11", "number literal"),
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_errors_are_located_with_exit_code_2(cli, tmp_path, case):
    text, where, message = ERROR_CASES[case]
    source = write(tmp_path, "k.cu", text)
    result = cli("scan", source, "--json")
    assert result.exit_code == 2, result.stdout
    assert result.stdout == ""
    first_line = result.stderr.splitlines()[0]
    assert first_line.startswith(f"{source}:{where}: error: "), result.stderr
    assert message in first_line
    assert "Traceback" not in result.stderr


def test_error_shows_the_line_and_a_caret(cli, tmp_path):
    source = write(tmp_path, "k.cu", "#define A 5 // @tune values(1, 2, 4)\n")
    lines = cli("scan", source).stderr.splitlines()
    assert lines[1] == "#define A 5 // @tune values(1, 2, 4)"
    assert lines[2] == " " * 10 + "^"


def test_missing_file(cli, tmp_path):
    missing = tmp_path / "nope.cu"
    result = cli("scan", missing)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"{missing}:1:1: error: no such file")


def test_the_installed_command_never_prints_a_traceback(tmp_path):
    source = write(tmp_path, "k.cu", "#pragma annotune constraint (\n#define A 1 // @tune bool\n")
    result = subprocess.run(
        [sys.executable, "-m", "annotune", "scan", str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{source}:1:" in result.stderr


def test_scan_shows_the_definition_the_compiler_sees(cli, tmp_path):
    source = write(
        tmp_path,
        "k.c",
        """
        #ifdef SMALL
        #define TILE 8 // @tune pow2(4, 64)
        #else
        #define TILE 32
        #endif
        int tiles[TILE];
        """,
    )
    report = cli.json("scan", source, "--json")
    (tile,) = report["params"]
    assert tile["default"] == 32
    assert tile["location"] == {"file": str(source), "line": 4, "column": 9}
    assert report["warnings"] == []
    table = cli("scan", source).stdout
    assert "k.c:4" in table


def test_a_parameter_the_environment_alone_carries_is_shown_as_env_not_as_a_d_flag(cli):
    source = Path(__file__).resolve().parents[1] / "data" / "threads" / "sum.c"
    result = cli("scan", source)
    assert result.exit_code == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if "THREADS" in line]
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    assert cells[5:] == ["env", "annotune.toml:4", "env"]


def test_names_holding_escape_sequences_or_markup_are_shown_escaped_and_literal(cli, tmp_path):
    """A file named `k\\x1b[2J.c` must not clear the screen of whoever scans it, nor `[bold]`
    in a name style the table: every text the consoles print is `printable`, markup off."""
    source = write(tmp_path, "k\x1b[2J[bold].c", "#define X 1 // @tune values(1, 2)\n")
    result = cli("scan", source)
    assert result.exit_code == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert "k\\x1b[2J[bold].c: 1 tunable parameters" in result.stdout
    assert "k\\x1b[2J[bold].c:1" in result.stdout  # the "declared at" column
    stderr = cli("scan", write(tmp_path, "w\x1b[2J.c", SKIPPED_USE)).stderr
    assert "\x1b" not in stderr and "w\\x1b[2J.c:1:9: warning: 'TILE'" in " ".join(stderr.split())

"""The config loader on random bytes and random TOML-ish text: a config, None, or an
AnnotuneError located inside the file; never another exception."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from annotune.annotate.config import FileConfig, load_file_config
from annotune.core.diagnostics import AnnotuneError

SETTINGS = settings(
    max_examples=200,
    deadline=None,
    database=None,  # no .hypothesis folder left behind
    suppress_health_check=[HealthCheck.function_scoped_fixture],  # one folder, rewritten
)

FILE_KEYS = ["include", "constraints", "defines", "compile", "run_dir", "args", "time_regex"]
FILE_KEYS += ["time_unit", "params", "env", "pth", "compiel", "files"]
NUMBER_KEYS = ["timeout", "repeats", "warmup"]
KEYS = [*FILE_KEYS, *NUMBER_KEYS, "path", "file", "fille", "domain", "default", "deflt", "tool"]
HEADERS = ["[[file]]", "[file.params]", "[file.env]", "[tool.annotune]", "[[tool.annotune.file]]"]
HEADERS += ["[file.params.N]", "[fille]", "[file]", "[[file.params]]", "[tool]"]
SCALARS = [
    *('"k.c"', '"values(2, 4)"', '"bool"', '"pow2(1, 8)"', '"gcc"', '"nvcc {source}"'),
    *('"{N}"', '"took ([0-9.]+) s"', '"("', '"s"', '"min"', '"."', '"nowhere"', '"\\u0000"'),
    *("4", "-1", "0.5", "inf", "nan", "-inf", "true", "1979-05-27", "1e400", "0x10"),
]
NUMBERS = ["4", "0", "-1", "0.5", "inf", "-inf", "nan", "1e400", "true", '"4"', "[]"]
PARAM_NAMES = ["N", "M", "A B", "_x", "9"]
DOMAINS = ['"values(2, 4)"', '"bool"', '"range(1, 5)"', '"pow2(1, 8)"', '"values(1"', '"x"']
DEFAULTS = ["4", "2", "1.5", "true", "inf", '"4"']
NAMES = st.sampled_from(["annotune.toml", "pyproject.toml"])


def toml_value(depth: int = 2) -> st.SearchStrategy[str]:
    scalar = st.sampled_from(SCALARS) | st.text(max_size=12).map(repr)
    if depth == 0:
        return scalar
    inner = toml_value(depth - 1)
    array = st.lists(inner, max_size=3).map(lambda items: "[" + ", ".join(items) + "]")
    table = st.lists(st.tuples(st.sampled_from(KEYS), inner), max_size=3).map(
        lambda pairs: "{" + ", ".join(f'"{k}" = {v}' for k, v in pairs) + "}"
    )
    return scalar | array | table


def assignments(keys: list[str], values: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """`"key" = value` lines, each key once."""
    pairs = st.lists(st.tuples(st.sampled_from(keys), values), max_size=4, unique_by=lambda p: p[0])
    return pairs.map(lambda items: "".join(f'"{k}" = {v}\n' for k, v in items))


PARAM_VALUES = st.sampled_from(DOMAINS) | st.builds(
    "{{ domain = {}, default = {} }}".format, st.sampled_from(DOMAINS), st.sampled_from(DEFAULTS)
)


def entry(prefix: str) -> st.SearchStrategy[str]:
    """A [[file]] naming the source: random keys, numbers, parameters and environment."""
    parts = st.tuples(
        assignments(FILE_KEYS, toml_value()),
        assignments(NUMBER_KEYS, st.sampled_from(NUMBERS)),
        assignments(PARAM_NAMES, PARAM_VALUES),
        assignments(["OMP_NUM_THREADS", "X", "A B", "1"], toml_value(0)),
    )
    return parts.map(
        lambda p: (
            f'[[{prefix}file]]\npath = "k.c"\n{p[0]}{p[1]}'
            f"[{prefix}file.params]\n{p[2]}[{prefix}file.env]\n{p[3]}"
        )
    )


def named_entry(name: str) -> st.SearchStrategy[tuple[str, str]]:
    return st.tuples(st.just(name), entry("" if name == "annotune.toml" else "tool.annotune."))


LINE = st.one_of(
    st.sampled_from(HEADERS),
    st.builds('"{}" = {}'.format, st.sampled_from(KEYS), toml_value()),
    st.builds("{} = {}".format, st.sampled_from(KEYS), toml_value()),
    st.text(max_size=20),  # anything at all
)
# Half the documents are an entry for the source (reaching every check of its keys and
# values), half random lines; random lines may follow either.
DOCUMENTS = NAMES.flatmap(named_entry) | st.tuples(
    NAMES, st.lists(LINE, max_size=12).map("\n".join)
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "k.c").write_text("#define N 4\nint a[N];\n")
    return tmp_path


def check_loads_or_locates(folder: Path, name: str, data: bytes) -> None:
    config = folder / name
    config.write_bytes(data)
    try:
        found = load_file_config(config, folder / "k.c")
    except AnnotuneError as error:
        where = error.location
        if where is None:
            return
        lines = data.split(b"\n")
        assert where.file == str(config)
        assert 1 <= where.line <= len(lines), (where, error.message)
        shown = lines[where.line - 1].decode("utf-8", errors="replace")
        assert 1 <= where.column <= len(shown) + 1, (where, error.message)
    else:
        assert found is None or isinstance(found, FileConfig)
        if found is not None:
            numbers = (found.settings.timeout, found.settings.repeats, found.settings.warmup)
            assert all(n is None or math.isfinite(n) for n in numbers)


@SETTINGS
@given(name=NAMES, data=st.binary(max_size=300))
def test_random_bytes(folder, name, data):
    check_loads_or_locates(folder, name, data)


@SETTINGS
@given(document=DOCUMENTS, tail=st.lists(LINE, max_size=2), bom=st.booleans(), crlf=st.booleans())
def test_random_toml_like_text(folder, document, tail, bom, crlf):
    name, text = document
    text = "\n".join([text, *tail])
    data = ("\ufeff" if bom else "") + (text.replace("\n", "\r\n") if crlf else text)
    check_loads_or_locates(folder, name, data.encode("utf-8", errors="surrogatepass"))

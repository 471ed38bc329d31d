"""Generated headers: the tuned values of a source's parameters, one header per device.

Tuned headers live at `OUT_DIR/<device-slug>/<stem>.h` (`tuned_header_path`; OUT_DIR defaults
to `tuned/` beside the source) and are meant to be committed. Their text is deterministic (no
timestamps, no absolute paths) so that re-tuning to the same result changes nothing in git,
and `write_if_changed` leaves an unchanged file alone so that make does not rebuild.

Every define is wrapped in `#ifndef NAME`, so a `-D NAME=...` on the command line still wins.
The environment the values are for (the config's `[file.env]` at them: `OMP_NUM_THREADS` of a
tuned `THREADS`) is a string macro per variable, `#define ANNOTUNE_ENV_OMP_NUM_THREADS "4"`,
which the program may read and `header_env` reads back for `annotune build --env-file`.

Importing this module is cheap: `annotune build` only finds and copies a tuned header on every
`make`, so jinja2 is imported when a header is first rendered and the other stages' types
(libclang's front end, numpy's records) only for type checking.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from annotune import __version__
from annotune.core.diagnostics import AnnotuneError, Location, printable
from annotune.core.files import (
    NAME_MAX,
    bounded_name,
    replace_atomically,
    same_content,
    why_not_writable,
)

if TYPE_CHECKING:
    import jinja2

    from annotune.annotate.problem import Problem, TunableParam
    from annotune.core.records import Number
    from annotune.emit.provenance import Provenance

TEMPLATE = "tuned_header.h.j2"
TUNED_DIR = "tuned"
PREDICTED = "predicted, not measured"
"""What a header written from a model's prediction alone says of itself."""
ENV_PREFIX = "ANNOTUNE_ENV_"
ARGS_PREFIX = "ANNOTUNE_ARG_"
"""What begins the name of each environment variable's macro in a header."""


def tuned_header_path(source: Path, device: str, out_dir: Path | None = None) -> Path:
    """Where the tuned header of `source` for `device` lives."""
    base = out_dir if out_dir is not None else source.parent / TUNED_DIR
    return base / slugify(device) / header_name(source)


def header_name(source: Path) -> str:
    """The file name of `source`'s tuned headers, `<stem>.h`: a stem too long for a file name
    with `.h` after it is shortened with a hash (`bounded_name`)."""
    return f"{bounded_name(source.stem, NAME_MAX - 2)}.h"


@dataclass(frozen=True)
class _Define:
    name: str
    value: str
    note: str
    declared: bool = False  # a C constant or variable: a #define of its name would break it


@dataclass(frozen=True)
class _EnvVar:
    name: str
    value: str  # a C string literal


def render_header(
    problem: Problem,
    params: Mapping[str, Number],
    *,
    device: str,
    space_size: int | None,
    measurements: int,
    default_time: float | None,
    best_time: float | None,
    tool_version: str,
    predicted: bool = False,
    speedup: str = "",
    note: str = "",
    environment: str = "",
    provenance: Provenance | None = None,
) -> str:
    """The tuned header: `params` (a value for every parameter of `problem`) and how they were
    found. Times are in milliseconds; `predicted` says `best_time` is a model's estimate rather
    than a measurement; `speedup` is the re-measured claim (the final check's speedup and its
    interval), never computed here from search times; `note` is one more line of the comment
    (`annotune predict` says there that the values are `PREDICTED`); `environment` the
    variables that changed the times ("OMP_NUM_THREADS=4, ..."): the tuned values hold under
    them; `provenance` what it was tuned from (`emit.provenance`: one JSON line of the comment,
for `annotune check`). Raises ValueError when `params` does not name exactly the parameters."""
    names = [p.name for p in problem.params]
    if set(params) != set(names):
        missing = sorted(set(names) - set(params))
        extra = sorted(set(params) - set(names))
        raise ValueError(f"params must name every parameter: missing {missing}, extra {extra}")
    from annotune.emit.provenance import provenance_line

    best = _ms(best_time)
    if predicted:
        best += f" ({PREDICTED})"
    return _template().render(
        defaults=False,
        source=problem.source.name,
        device=device,
        tool_version=tool_version,
        space_size="unknown" if space_size is None else f"{space_size}",
        measurements=measurements,
        default_time=_ms(default_time),
        best_time=best,
        speedup=speedup,
        note=note,
        environment=environment,
        provenance=provenance_line(provenance) if provenance is not None else "",
        guard=_guard(problem.source),
        params=[_define(p, params[p.name], problem.source.name) for p in problem.params],
        **_env(problem, params),
    )


def render_defaults_header(
    problem: Problem, *, device: str | None = None, tool_version: str = __version__
) -> str:
    """Every parameter at its default: the header for a device (named, if given) that has no
    tuned one."""
    return _template().render(
        defaults=True,
        source=problem.source.name,
        device=device,
        tool_version=tool_version,
        provenance="",
        guard=_guard(problem.source),
        params=[_define(p, p.default, problem.source.name) for p in problem.params],
        **_env(problem, {p.name: p.default for p in problem.params}),
    )


def write_if_changed(path: Path, text: str) -> bool:
    """Make `path` hold exactly `text` (UTF-8, newlines as given); True if it was written.

    An unchanged file is not touched, so its mtime stays and make sees nothing new. Otherwise
    the text goes to a temporary file unique to this call in the same directory, which is then
    renamed over `path`: readers see the old file or the new one, never a partial one, even
    with many writers at once (`make -j`). A device or FIFO (`-o /dev/stdout`) is never read to
    compare and is written in place (`replace_atomically`). AnnotuneError naming `path` when it
    cannot be written (no space left, read-only, a directory): the old file is then intact.
    """
    data = text.encode("utf-8")
    if same_content(path, data):
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(path, data)
    except OSError as error:  # mkdir's "File exists" means a file where a directory must be
        reason = why_not_writable(path) or error.strerror or str(error)
        raise AnnotuneError(f"cannot write {path}: {reason}") from None
    return True


def check_headers_writable(source: Path, out_dir: Path | None) -> None:
    """AnnotuneError, asked before any work, when the tuned headers of `source` could not be
    written under `out_dir` (default: tuned/ beside it): a tune that runs for an hour must not
    end with its header lost to a read-only or misnamed directory."""
    base = out_dir if out_dir is not None else source.parent / TUNED_DIR
    reason = why_not_writable(base, directory=True)
    if reason is not None:
        raise AnnotuneError(
            f"cannot write the tuned header in {base}: {reason}",
            hint="--out-dir DIR puts it in another directory",
        )


@cache
def _template() -> jinja2.Template:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("annotune.emit", "templates"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_printable,  # a source named `k\xff.c` is written so, not as bytes
    )
    env.filters["comment"] = _comment_safe
    return env.get_template(TEMPLATE)


def _define(param: TunableParam, value: Number, source_name: str) -> _Define:
    note = f"{param.domain}; default {param.literal(param.default)}"
    if param.declaration:
        note += f"; a C {param.declaration}"
    elif not param.guarded:
        note += f"; the source ignores this until `annotune lift {source_name}`"
    return _Define(param.name, param.literal(value), note, bool(param.declaration))


def _env(problem: Problem, params: Mapping[str, Number]) -> dict:
    """The template's environment block: the config's `[file.env]` at `params`."""
    # annotate is loaded: it made `problem`
    from annotune.annotate.summary import arguments_at, environment_at

    env = environment_at(problem, params)
    args = arguments_at(problem, params)
    return {
        "env_prefix": ENV_PREFIX,
        "env": [_EnvVar(k, _c_string(v)) for k, v in env.items()],
        "args_prefix": ARGS_PREFIX,
        "args": [_c_string(arg) for arg in args] if args is not None else [],
    }


_PLAIN = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;/=+@%^~!#$&()[]{}<>|"
)  # characters a C string literal holds as they are; `*` too would let "/*" open a comment


def _c_string(text: str) -> str:
    """`text` as a C string literal that `header_env` reads back exactly: every byte of its
    UTF-8 other than `_PLAIN` characters as a three-digit octal escape."""
    return (
        '"'
        + "".join(chr(b) if chr(b) in _PLAIN else f"\\{b:03o}" for b in text.encode("utf-8"))
        + '"'
    )


_ENV_DEFINE = re.compile(
    r"[ \t]*#[ \t]*define[ \t]+" + ENV_PREFIX + r"([A-Za-z_][A-Za-z0-9_]*)[ \t]+(.*?)[ \t]*"
)
_STRING = re.compile(r'"((?:[^"\\\n]|\\[0-7]{1,3}|\\["\\])*)"')
_PIECE = re.compile(r"\\([0-7]{1,3})|\\(.)|([^\\]+)")


def header_env(text: str, path: str) -> dict[str, str]:
    """The environment a tuned header says its values are for (its `ANNOTUNE_ENV_` macros), in
    its order; {} for a header without (older, or a source whose config sets none).
    AnnotuneError at the line of a macro whose value is not a string literal annotune reads
    (plain characters, octal escapes, `\\"` and `\\\\`) or not UTF-8."""
    return dict(_string_macros(text, path, _ENV_DEFINE, "the environment variable"))


_ARG_DEFINE = re.compile(
    r"[ \t]*#[ \t]*define[ \t]+" + ARGS_PREFIX + r"([0-9]+)[ \t]+(.*?)[ \t]*"
)


def header_args(text: str, path: str) -> list[str] | None:
    """The program's arguments a tuned header says its values are for (its `ANNOTUNE_ARG_N`
    macros, in order); None for a header without (no knob in the arguments). AnnotuneError
    at the line of one annotune cannot read."""
    args = {
        int(index): value
        for index, value in _string_macros(text, path, _ARG_DEFINE, "the program argument")
    }
    if not args:
        return None
    if sorted(args) != list(range(len(args))):
        raise AnnotuneError(
            f"this header's program arguments skip a number ({ARGS_PREFIX}0, 1, ...)",
            Location(path, 1, 1),
        )
    return [args[index] for index in range(len(args))]


def _string_macros(
    text: str, path: str, pattern: re.Pattern[str], what: str
) -> Iterator[tuple[str, str]]:
    """(name, value) of each line of `text` that `pattern` matches, its second group a C
    string literal; AnnotuneError at the line of one annotune cannot read."""
    for number, line in enumerate(text.splitlines(), start=1):
        define = pattern.fullmatch(line)
        if define is None:
            continue
        literal = _STRING.fullmatch(define.group(2))
        try:
            if literal is None:
                raise ValueError("not a string literal")
            value = _string_value(literal.group(1))
        except ValueError as error:  # UnicodeDecodeError too
            raise AnnotuneError(
                f"{what} {define.group(1)} of this header is "
                f"'{define.group(2)}', which annotune cannot read ({error})",
                Location(path, number, line.index(define.group(2)) + 1),
            ) from None
        yield define.group(1), value


def _string_value(body: str) -> str:
    """The text a C string literal's body (between its quotes) stands for; ValueError for a
    byte that no environment variable holds, or bytes that are not UTF-8."""
    data = bytearray()
    for octal, escaped, plain in _PIECE.findall(body):
        if not octal:
            data += (escaped or plain).encode("utf-8")
        elif 0 < int(octal, 8) < 256:
            data.append(int(octal, 8))
        else:
            raise ValueError(f"\\{octal} is no character of an environment variable")
    return data.decode("utf-8")


def _ms(time: float | None) -> str:
    return "not measured" if time is None else f"{time:.6g} ms"


def _guard(source: Path) -> str:
    stem = "".join(ch if ch.isascii() and ch.isalnum() else "_" for ch in source.stem.upper())
    return f"ANNOTUNE_TUNED_{stem}_H"


def _printable(value: object) -> object:
    """What a template writes of `value`: a string with a name's bytes that are not UTF-8
    escaped (`printable`), so that the header is UTF-8 text."""
    return printable(value) if isinstance(value, str) else value


def _comment_safe(text: object) -> str:
    """Text that cannot end the C comment it is put in, or break its line."""
    return " ".join(str(text).replace("*/", "* /").split())


SLUG_MAX = 100
"""The most characters of a device's slug (one directory's name)."""
_MARKS = re.compile(r"\((r|tm|c)\)|[®™©]")
_UNSAFE = re.compile(r"[^a-z0-9.]+")


def slugify(name: str) -> str:
    """A lowercase file name for a device name: letters, digits, '.' and single '-'.

    "NVIDIA A100-PCIE-40GB" -> "nvidia-a100-pcie-40gb";
    "cpu-Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz" -> "cpu-intel-xeon-gold-6230-cpu-2.10ghz".
    Trademark signs are dropped; the slug never starts or ends with '.' or '-'. A slug longer
    than `SLUG_MAX` characters (a 5,000-character `--device`) is its beginning and a hash of
    the whole (`bounded_name`), so that it stays a file name; every shorter one is as it was.
    """
    text = _MARKS.sub("", name.lower())
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    slug = _UNSAFE.sub("-", text).strip("-.")
    slug = re.sub(r"\.{2,}", ".", slug)
    return bounded_name(slug or "unknown", SLUG_MAX)

"""What the front end hands to the rest of annotune: the tuning problem read from the source."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from annotune.annotate.device_code import DeviceCode
from annotune.annotate.kernels import KernelSpec
from annotune.annotate.source import TextSpan
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.literals import as_declared, c_literal
from annotune.core.output_check import OutputCheck
from annotune.core.records import Number

ORIGINS = ("define", "pragma", "literal", "config", "size")
"""Where a parameter was declared; "size" is a problem size fixed for one tune (`--sizes`)."""


REWRITTEN = "rewritten by [[file.launch]]"
"""A `Use`'s detail where a launch the config rewrites names the parameter."""


@dataclass(frozen=True)
class Use:
    """A place where a parameter's value matters.

    kind: "launch" (a kernel launch configuration or a dim3 built for one), "pragma",
    "preprocessor" (an #if condition), "macro" (another macro's definition, named in
    `detail`), or "code"; `function` is the enclosing function, `kernel` whether it is a
    `__global__` function.
    """

    kind: str
    location: Location
    function: str | None = None
    kernel: bool = False
    detail: str = ""

    def to_json(self) -> dict:
        data = {"kind": self.kind, "location": self.location.to_json()}
        if self.function is not None:
            data["function"] = self.function
            data["kernel"] = self.kernel
        if self.detail:
            data["detail"] = self.detail
        return data


@dataclass(frozen=True)
class TunableParam:
    """One tunable: its domain, default, where it is declared and where it is used.

    `guarded` says whether `-D NAME=...` can override it: its #define sits inside
    `#ifndef NAME` (or there is no #define at all). `value_span` is the text of the default
    value in the #define, pragma literal or constant's initializer (None for a pragma param
    without a #define).
    """

    name: str
    values: tuple[Number, ...]
    default: Number
    origin: str
    guarded: bool
    location: Location
    domain: str
    uses: tuple[Use, ...] = ()
    value_span: TextSpan | None = None
    # The C declaration whose initializer sets it, rewritten in a copy: "constant" (const,
    # constexpr, an enumerator), "variable", or "assignment" (a statement `x = 256;` where no
    # declaration initializes it); "" for a macro or a pragma literal.
    declaration: str = ""
    # Where else the same default is written: the other declarations of one C name with the
    # same initial value (a local `int threads = 256;` in each of two functions), set together.
    more_spans: tuple[TextSpan, ...] = ()
    # Where the same number stands in what the knob governs and no variant rewrites it (the
    # grid's `(n + 255) / 256` of a block of 256, `__launch_bounds__(256)`): each place and
    # what it is. A variant then changes the knob alone, which may change the work done.
    couplings: tuple[tuple[Location, str], ...] = ()

    def literal(self, value: Number) -> str:
        """`value` as C source, of the type its domain declares it with (`2.0` stays a
        double however it was stored): what a variant is compiled with and a header holds."""
        return c_literal(as_declared(value, self.values))

    @property
    def unread(self) -> bool:
        """A config parameter that the user's files neither define nor use: no `-D` or copy
        reaches the program through it (only its environment may, `[file.env]`)."""
        return self.origin == "config" and self.value_span is None and not self.uses

    @property
    def rewritten_only(self) -> bool:
        """A config parameter only rewritten launches use (`[[file.launch]]`): no macro of the
        program's, so neither `-D` nor a header reaches it; a copy does."""
        return (
            self.origin == "config"
            and self.value_span is None
            and bool(self.uses)
            and all(u.detail == REWRITTEN for u in self.uses)
        )

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "values": list(self.values),
            "default": self.default,
            "origin": self.origin,
            "guarded": self.guarded,
            "location": self.location.to_json(),
            "domain": self.domain,
            "uses": [use.to_json() for use in self.uses],
        }


_NAME_OR_STRING = re.compile(
    r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'|(?<![\w.])(?<!->)([A-Za-z_]\w*)"
)


@dataclass(frozen=True)
class Rewrite:
    """Code that must not be edited rewritten in every variant's copy with a C expression over
    knobs (`[[file.launch]]`'s `grid = "(n + BS - 1) / BS"`): `span` the bytes written there,
    `template` the expression, `names` the knobs it names, `what` the place as messages say it
    ("the grid of the launch of rotate at rotate.cu:12"), `written` what the code has there."""

    span: TextSpan
    template: str
    names: tuple[str, ...]
    what: str
    written: str

    def text(self, literals: Mapping[str, str]) -> str:
        """The template with each knob's name replaced by its value as C (`literals`, by name;
        a negative one parenthesized); other names, members and strings are left as written."""

        def fill(match: re.Match) -> str:
            name = match.group(1)
            if name is None or name not in literals:
                return match.group(0)
            value = literals[name]
            return f"({value})" if value.startswith("-") else value

        return _NAME_OR_STRING.sub(fill, self.template)

    def to_json(self) -> dict:
        return {
            "what": self.what,
            "written": self.written,
            "template": self.template,
            "knobs": list(self.names),
            "file": self.span.file,
        }


def template_names(template: str) -> list[str]:
    """The names a rewrite's template uses as values (not members, not inside strings)."""
    return [m.group(1) for m in _NAME_OR_STRING.finditer(template) if m.group(1)]


@dataclass(frozen=True)
class ConstraintDecl:
    expr: str  # as written; a continued pragma keeps its newlines so offsets map to lines
    location: Location
    origin: str = "pragma"

    @property
    def text(self) -> str:
        """The expression on one line, for display."""
        return " ".join(self.expr.split())

    def location_at(self, offset: int) -> Location:
        """Where the character `offset` characters into the expression is."""
        before = self.expr[:offset]
        newlines = before.count("\n")
        if newlines == 0:
            return self.location.shifted(offset)
        return Location(
            self.location.file, self.location.line + newlines, offset - before.rfind("\n")
        )

    def to_json(self) -> dict:
        return {"expr": self.text, "location": self.location.to_json()}


@dataclass(frozen=True)
class EnvSetting:
    """An environment variable set for every run (`[file.env]`); `{NAME}` in its value is the
    configuration's value of the parameter NAME. `location`: where the value is written, for
    the error when NAME is no parameter (known only once the whole problem is read)."""

    name: str
    value: str
    location: Location


@dataclass(frozen=True)
class RunSettings:
    """How to build and run the program: from `[[file]]` in the config, or
    `#pragma annotune args ...` for the program's arguments. None means "the default"."""

    compile: tuple[str, ...] | None = None  # a compile command template (see build.compiler)
    args: tuple[str, ...] = ()
    time_regex: str | None = None
    time_unit: str | None = None  # of what time_regex captures: s, ms, us or ns
    timeout: float | None = None
    repeats: int | None = None
    warmup: int | None = None
    run_dir: str | None = None  # absolute: the config's run_dir, where the program runs
    env: tuple[EnvSetting, ...] = ()
    output_check: OutputCheck | None = None  # `[file.check]`: what a correct run prints


@dataclass(frozen=True)
class Problem:
    """A source file's tuning problem: parameters, constraints and the files they live in."""

    source: Path
    language: str
    params: tuple[TunableParam, ...]
    constraints: tuple[ConstraintDecl, ...]
    files: tuple[str, ...]
    config_file: str | None = None
    missing_includes: tuple[tuple[Location, str], ...] = ()  # local headers not found
    settings: RunSettings = RunSettings()
    kernels: tuple[KernelSpec, ...] = ()  # each `#pragma annotune kernel` or [[file.kernel]]
    timing_header: bool = False  # the source includes annotune_timing.h: runs print their time
    # Absolute directories from the config's `include = [...]`: libclang searched them, and the
    # compiler must too (as -I), or it reads other headers than the ones annotune read.
    include_dirs: tuple[str, ...] = ()
    # Directive families the user's files use, "omp" and/or "acc" (`#pragma omp`, or including
    # omp.h for the runtime alone): each needs its compiler flag, or its pragmas are ignored.
    pragmas: frozenset[str] = frozenset()
    # Kernel mode only: what of the user's files NVRTC must not see (annotate.device_code).
    device_code: DeviceCode | None = None
    # Launches of code that must not be edited, rewritten over knobs (`[[file.launch]]`).
    rewrites: tuple[Rewrite, ...] = ()
    # Every other path the reading of `files` depends on, absolute: each place an include was
    # looked for (the header found, or no file there: its appearing is a change), each forced
    # include and each response file of the compile command (`annotate.source.search`).
    looked_at: tuple[str, ...] = ()

    def param(self, name: str) -> TunableParam:
        for param in self.params:
            if param.name == name:
                return param
        raise KeyError(name)


def kernel_only_params(problem: Problem) -> frozenset[str]:
    """The parameters that reach the code only through a kernel's declaration: declared in
    the config, neither defined nor used in the user's files, and named by a declared kernel
    (`block_sum<float, BT>`, `block(BT)`). Kernel mode gives them to the kernel; no `-D` is
    made of one (`-DBLOCK_THREADS=128` would rewrite every use of a name the code never
    meant as this knob), and a program never sees them."""
    named = {name for kernel in problem.kernels for name in kernel.names()}
    return frozenset(p.name for p in problem.params if p.unread and p.name in named)


def rewrite_only_params(problem: Problem) -> frozenset[str]:
    """The parameters that reach the code only through a rewrite (`[[file.launch]]`): declared
    in the config, neither defined nor used in the user's files, every use of theirs a rewritten
    launch. No `-D` is made of one, and a header cannot set one: only a rewritten copy
    (`--shadow-dir`) does."""
    return frozenset(p.name for p in problem.params if p.rewritten_only)


def chosen_kernel(problem: Problem, mode: str, name: str | None) -> KernelSpec | None:
    """The kernel a tune in `mode` ("program", "kernel" or "auto") launches, None when it runs
    the program: `name`'s (`--kernel`), or the one declared.

    Called before anything is compiled, so that kernel mode is never quietly program mode:
    `--mode kernel` on a source that declares no kernel, `--kernel` naming one not declared
    (in any mode), or several declared and none named, is an AnnotuneError.
    """
    if mode not in ("program", "kernel", "auto"):
        raise AnnotuneError(f"unknown mode {mode!r} (expected program, kernel or auto)")
    kernels = problem.kernels
    source = Location(str(problem.source), 1, 1)
    if mode == "program" and name is not None:
        raise AnnotuneError(
            f"--kernel {name} names a kernel to launch, but --mode program runs the program",
            hint="drop --kernel, or tune it with --mode kernel",
        )
    if not kernels:
        if mode == "kernel" or name is not None:
            said = f"--kernel {name}: " if name is not None else ""
            raise AnnotuneError(
                f"{said}kernel mode needs a declared kernel, and {problem.source.name} declares "
                "none",
                source,
                hint="declare it with '#pragma annotune kernel NAME grid(...) block(...) "
                "args(...)' in the source, or, for code you must not edit, a [[file.kernel]] "
                "table (name, grid, block, args) in its annotune.toml",
            )
        return None
    if mode == "program":
        _reaches_the_program(problem)
        return None
    if name is None:
        if len(kernels) > 1:
            listed = ", ".join(k.declared for k in kernels)
            raise AnnotuneError(
                f"{len(kernels)} kernels are declared ({listed}): choose one with --kernel",
                kernels[0].location,
            )
        return kernels[0]
    wanted = "".join(name.split())  # `dot< double >` is `dot<double>`
    found = [k for k in kernels if "".join(k.declared.split()) == wanted]
    found = found or [k for k in kernels if k.name == name]  # a template's name, alone
    if len(found) == 1:
        return found[0]
    declared = "; ".join(
        f"{k.declared} at {k.location.file}:{k.location.line}:{k.location.column}" for k in kernels
    )
    if found:
        raise AnnotuneError(
            f"--kernel {name}: {len(found)} instances of it are declared: name one",
            hint=f"declared: {declared}",
        )
    raise AnnotuneError(
        f"--kernel {name}: no such kernel is declared", hint=f"declared: {declared}"
    )


def _reaches_the_program(problem: Problem) -> None:
    """AnnotuneError when a knob reaches only a kernel's declaration: a program tune would
    measure one program under every value."""
    only = sorted(kernel_only_params(problem))
    if only:
        found = next(p for p in problem.params if p.name == only[0])
        raise AnnotuneError(
            f"'{only[0]}' reaches the code only through a declared kernel: the program is the "
            "same for each of its values",
            found.location,
            hint="tune it with --mode kernel, which launches the kernel with it",
        )

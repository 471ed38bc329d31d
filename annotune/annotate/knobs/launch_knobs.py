"""Knobs a config names in the launches of CUDA code that must not be edited.

`BS = { domain = "...", launch = "rotate" }` is the block size written as a number in every
launch of `rotate` the compiler sees (`rotate<<<g, 256>>>`; `arg = "grid"`, `"block.y"` or
`"shared"` another argument, `dim3(4, 4)` by component); `BX = { dim3 = "block.x" }` is a
component of a `dim3 block (16, 16);` declaration. `line` and `function` narrow either to one
place. Each literal is rewritten in a copy, its number the default, as a clause's is.

Such a number rarely stands alone: the grid is computed from it (`(n + 255) / 256`), the
kernel declares `__launch_bounds__(256)` or a `__shared__ float s[256]`, a template argument
repeats it. A variant that rewrites the block alone then launches other work, faster and
wrong. Those places are found here (`couplings`) and said by `scan` before anything compiles.
"""

from __future__ import annotations

from annotune.annotate.config import ClausePlace, ConfigParam
from annotune.annotate.grammar import parse_number
from annotune.annotate.knobs.c_declarations import code_tokens
from annotune.annotate.knobs.clause_knobs import add_literal_knob, narrowed
from annotune.annotate.knobs.launch_sites import (
    Dim3Declaration,
    Group,
    LaunchSite,
    dim3_declarations,
    launch_sites,
    split_top,
)
from annotune.annotate.knobs.state import Collector
from annotune.annotate.source import SourceFile, Token
from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.records import Number

_ARGS = {"grid": 0, "block": 1, "shared": 2}
_COMPONENTS = {"": 0, "x": 0, "y": 1, "z": 2}


def add_launch_knob(collector: Collector, spec: ConfigParam, place: ClausePlace) -> None:
    """The config's knob `spec` as the literals of `place` (a launch's argument, or a `dim3`
    declaration's component); AnnotuneError at the config when there is none, or one is not
    a number."""
    found: list[tuple[SourceFile, Token]] = []
    problems: list[str] = []
    sites: list[tuple[SourceFile, LaunchSite]] = []
    declared: dict[str, list[Dim3Declaration]] = {}  # by file: read once, for couplings too
    for source in collector.parsed.files:
        tokens = code_tokens(source)
        file_sites = launch_sites(tokens)
        sites += [(source, site) for site in file_sites]
        declared[source.path] = dim3_declarations(tokens)
        if place.kind == "launch":
            groups = _launch_groups(collector, source, file_sites, place, problems)
        else:
            groups = _dim3_groups(collector, source, declared[source.path], place, problems)
        for group in groups:
            literal = _literal(group)
            if literal is None:
                problems.append(f"`{group.text}` at {site_at(source, group.start)}")
            else:
                found.append((source, literal))
    if problems and (not found or place.line is None):
        hint = (
            'a name there is tuned by its declaration (`dim3 = "NAME.x"`, or the variable by '
            "its name); narrow the knob to a place with a number with `line` or `function`"
        )
        raise AnnotuneError(
            f"{spec.name}: {place.described()} is {problems[0]}, not a number literal",
            place.location,
            hint=hint,
        )
    if not found:
        raise AnnotuneError(
            f"{spec.name}: nothing the compiler sees in {collector.parsed.main.path} or its "
            f"local headers is {place.described()}",
            place.location,
        )
    default = parse_number(found[0][1].text)
    own = {(source.path, token.start) for source, token in found}
    couplings = (
        () if spec.independent else _couplings(collector, place, sites, declared, default, own)
    )
    add_literal_knob(collector, spec, place, found, couplings)


def _launch_groups(
    collector: Collector,
    source: SourceFile,
    sites: list[LaunchSite],
    place: ClausePlace,
    problems: list[str],
) -> list[Group]:
    """The pieces `place` names in the launches of its kernel in `source`."""
    argument, _, component = place.part.partition(".")
    groups = []
    for site in sites:
        if place.clause not in (site.kernel, site.kernel.rsplit("::", 1)[-1]):
            continue
        if not narrowed(collector, source, site.opening.start, site.closing.end, place):
            continue
        index = _ARGS[argument]
        if index >= len(site.config):
            problems.append(f"absent at {site_at(source, site.opening.start)}")
            continue
        piece = launch_component(site.config[index], component)
        if piece is None:
            problems.append(f"`{site.config[index].text}` at {site_at(source, site.opening.start)}")
        else:
            groups.append(piece)
    return groups


def _dim3_groups(
    collector: Collector,
    source: SourceFile,
    declarations: list[Dim3Declaration],
    place: ClausePlace,
    problems: list[str],
) -> list[Group]:
    """The components `place` names of the `dim3` declarations of its variable in `source`."""
    groups = []
    for declaration in declarations:
        if declaration.name.text != place.clause:
            continue
        start = declaration.name.start
        if not narrowed(collector, source, start, declaration.name.end, place):
            continue
        index = _COMPONENTS[place.part]
        if index >= len(declaration.components):
            written = ", ".join(c.text for c in declaration.components) or "nothing"
            problems.append(
                f"not written at {site_at(source, start)} (`dim3 {place.clause}({written})`: "
                "an absent component is 1)"
            )
            continue
        groups.append(declaration.components[index])
    return groups


def launch_component(group: Group, component: str) -> Group | None:
    """The piece of a launch argument a component names: the argument itself (`256`, or `.x`
    of it), or one component of an inline `dim3(8, 16)`; None when it is written otherwise."""
    tokens = group.tokens
    if len(tokens) >= 3 and tokens[0].text == "dim3" and tokens[1].text in ("(", "{"):
        inside = split_top(tokens[2:-1], tokens[1].end, tokens[-1].start)
        index = _COMPONENTS[component]
        return inside[index] if index < len(inside) else None
    return group if component in ("", "x") else None


def _literal(group: Group) -> Token | None:
    """The group's one number literal token, if that is all it is."""
    if len(group.tokens) != 1 or group.tokens[0].kind != "literal":
        return None
    try:
        parse_number(group.tokens[0].text)
    except ValueError:
        return None
    return group.tokens[0]


def _couplings(
    collector: Collector,
    place: ClausePlace,
    sites: list[tuple[SourceFile, LaunchSite]],
    declared: dict[str, list[Dim3Declaration]],
    default: Number,
    own: set[tuple[str, int]],
) -> tuple[tuple[Location, str], ...]:
    """Where `default` (or `default - 1`, the round-up of `(n + 255) / 256`) is written again
    in what the knob governs: the other arguments and template arguments of the launches it
    is in (or that name its `dim3`), and the launched kernel's `__launch_bounds__` and array
    bounds; none of it a place of the knob itself."""
    found: list[tuple[Location, str]] = []
    numbers = {default, default - 1}
    kernels: set[str] = set()
    for source, site in sites:
        named = any(  # a launch the knob is a literal of
            (source.path, t.start) in own for group in site.config for t in group.tokens
        )
        if place.kind == "dim3":
            named = any(t.text == place.clause for g in site.config for t in g.tokens)
        if not named:
            continue
        kernels.add(site.kernel.rsplit("::", 1)[-1])
        pieces = [("the launch's " + name, g) for name, g in zip(_ARGS, site.config, strict=False)]
        pieces += [("a template argument of the launch", g) for g in site.template or ()]
        pieces += [
            (f"`dim3 {d.name.text}` of the launch", component)
            for group in site.config
            for d in declared.get(source.path, [])
            if len(group.tokens) == 1 and group.tokens[0].text == d.name.text != place.clause
            for component in d.components
        ]
        for what, group in pieces:  # one warning per piece, at its first such number
            token = next(
                (
                    t
                    for t in group.tokens
                    if (source.path, t.start) not in own and _number(t) in numbers
                ),
                None,
            )
            if token is not None:
                found.append((source.location(token.start), f"{what} `{group.text}`"))
    for function in collector.parsed.functions:
        if function.name not in kernels:
            continue
        source = collector.parsed.file(function.file)
        found += kernel_couplings(source, function.start, function.end, {default}, own)
    unique: dict[tuple[str, str], tuple[Location, str]] = {}
    for location, what in found:  # a declaration two launches name is said once
        unique.setdefault((location.file, what), (location, what))
    return tuple(unique.values())


def kernel_couplings(
    source: SourceFile, start: int, end: int, numbers: set[Number], own: set[tuple[str, int]]
) -> list[tuple[Location, str]]:
    """`__launch_bounds__(N)` and array bounds `[N]` of the kernel's text that hold one of
    `numbers`."""
    tokens = [t for t in source.tokens if start <= t.start < end and t.kind != "comment"]
    found = []
    for index, token in enumerate(tokens):
        if (source.path, token.start) in own or _number(token) not in numbers:
            continue
        before = tokens[index - 1].text if index else ""
        bounds = index >= 2 and tokens[index - 2].text == "__launch_bounds__"
        if bounds:
            found.append((source.location(token.start), "the kernel's `__launch_bounds__`"))
        elif before == "[":
            found.append((source.location(token.start), "an array bound in the kernel"))
    return found


def _number(token: Token) -> Number | None:
    if token.kind != "literal":
        return None
    try:
        return parse_number(token.text)
    except ValueError:
        return None


def site_at(source: SourceFile, offset: int) -> str:
    location = source.location(offset)
    return f"{location.file}:{location.line}"

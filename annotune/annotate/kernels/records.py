"""The kernel declarations, checked and typed: `KernelSpec` (what a tune in kernel mode launches),
its arguments (`KernelArg`), template arguments (`TemplateArg`) and the `__constant__`
variables to fill (`KernelConstant`). Each computes its part of a configuration's `Launch`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from annotune.annotate.grammar.kernel_items import Fill, one_line
from annotune.annotate.kernels.launch import (
    Launch,
    LaunchArg,
    LaunchConstant,
    LaunchError,
    checked_fill,
    dimensions,
    non_negative,
    value_of,
    whole,
)
from annotune.core.diagnostics import Location
from annotune.core.records import Number
from annotune.space.expressions import Expression

POINTER_KINDS = ("in", "out", "inout")


@dataclass(frozen=True)
class TemplateArg:
    """One template argument of a kernel's instance: a type, as written (`expr` None), or a
    number, an expression over the knobs and macros evaluated per configuration: a block size
    passed as a template parameter is a knob kernel mode can tune."""

    text: str  # as written, for messages
    expr: Expression | None = None
    boolean: bool = False  # a `bool` parameter, written true/false (C++17 refuses 1 for it)
    canonical: str = ""  # a type's canonical spelling (`double` for `real`), as symbols show it
    number: bool = False  # a non-type argument (`expr` None: C++'s own, such as an enumerator)

    def written(self, values: Mapping[str, Number]) -> str:
        """The argument as C++ source for one configuration's values."""
        if self.expr is None:
            return self.canonical or self.text
        value = value_of(self.expr, values, f"the template argument '{self.text}'")
        if self.boolean:
            return "true" if value else "false"
        if isinstance(value, float) and not value.is_integer():
            raise LaunchError(f"the template argument '{self.text}' is {value}, not an integer")
        return str(int(value))


@dataclass(frozen=True)
class KernelArg:
    """One kernel parameter and what the pragma says to pass for it.

    `kind` is "in", "out", "inout" (pointers: `expr` is the element count) or "scalar" (`expr`
    is the value). `dtype` is the numpy dtype name of the element (pointers) or the value
    (scalars); `ctype` the parameter's C type as written, for messages.
    """

    name: str
    kind: str
    dtype: str
    ctype: str
    expr: Expression
    location: Location
    const: bool = False
    fill: Fill | None = None  # how an input array is filled; None: the default rule

    @property
    def is_pointer(self) -> bool:
        return self.kind != "scalar"

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "type": self.ctype,
            "expr": one_line(self.expr),
            **({"fill": self.fill.to_json()} if self.fill is not None else {}),
        }


@dataclass(frozen=True)
class KernelSpec:
    """A `#pragma annotune kernel`, checked against the kernel's definition.

    `macros` are the numeric macros the expressions use (directly or through other macros), in
    an order where each comes after the macros it uses; they may use tunable parameters.
    """

    name: str
    mangled_name: str
    grid: tuple[Expression, ...]
    block: tuple[Expression, ...]
    shared: Expression | None
    args: tuple[KernelArg, ...]
    macros: tuple[tuple[str, Expression], ...]
    location: Location
    template: tuple[TemplateArg, ...] = ()  # a template kernel's arguments; () for a function
    scope: str = ""  # the namespaces it is declared in, as C++ names them: "ns::"
    tolerance: float | None = None  # tolerance(R): the outputs' relative tolerance
    constants: tuple[KernelConstant, ...] = ()  # the __constant__ variables the host would set
    places: tuple[tuple[str, Location], ...] = ()  # where each clause is written, by name
    instance_text: str = ""  # a template kernel's `<...>` as declared: "<double>", "<T, BT>"

    @property
    def declared(self) -> str:
        """The kernel as its declaration names it, what tells two instances of one template
        apart: `dot<double>` (spaces as C++ ignores them, one after each comma), or `scale`.
        `--kernel` chooses by it; build symbols and instances are keyed by it."""
        return f"{self.name}{self.instance_text}"

    def where(self, clause: str) -> Location:
        """Where `clause` ("grid", "block", "shared") is written in the declaration, else where
        the declaration names the kernel: what an error about every configuration's launch
        points at."""
        return dict(self.places).get(clause, self.location)

    def launch(self, params: Mapping[str, Number]) -> Launch:
        """Grid, block, dynamic shared bytes and arguments for one configuration.

        Raises LaunchError where C leaves a value undefined or a dimension is out of range.
        """
        values = self._values(params)
        grid = dimensions(self.grid, values, "grid")
        block = dimensions(self.block, values, "block")
        shared = 0
        if self.shared is not None:
            value = value_of(self.shared, values, "shared(...)", "shared")
            shared = non_negative(whole(value, "shared(...)", "shared"), "shared(...)", "shared")
        args = []
        for arg in self.args:
            value = value_of(arg.expr, values, f"the argument for '{arg.name}'")
            if arg.is_pointer:
                count = non_negative(value, f"the element count of '{arg.name}'")
                fill = None
                if arg.fill is not None:
                    what = f"the fill of '{arg.name}'"
                    bounds = tuple(value_of(b, values, what) for b in arg.fill.bounds)
                    fill = checked_fill(arg.fill.rule, arg.dtype, arg.ctype, count, bounds, what)
                args.append(LaunchArg(arg.name, arg.kind, arg.dtype, count=count, fill=fill))
            else:
                args.append(LaunchArg(arg.name, arg.kind, arg.dtype, value=value))
        constants = tuple(c.launched(values) for c in self.constants if not c.why)
        return Launch(grid, block, shared, tuple(args), constants)

    def instance(self, params: Mapping[str, Number]) -> str:
        """A template kernel's instance for one configuration, as C++ names it
        (`ns::scale<float, 256>`): what NVRTC is asked to instantiate and lower, and what the
        nvcc build's cubin is searched for. "" for a kernel that is no template (its symbol is
        `mangled_name`). Raises LaunchError as `launch` does."""
        if not self.template:
            return ""
        values = self._values(params)
        written = ", ".join(arg.written(values) for arg in self.template)
        return f"{self.scope}{self.name}<{written}>"

    def names(self) -> frozenset[str]:
        """Every name the declaration's expressions use: its launch, arguments, fills,
        template arguments and constants' fills."""
        exprs = [*self.grid, *self.block, self.shared, *(a.expr for a in self.args)]
        exprs += [t.expr for t in self.template]
        fills = [a.fill for a in self.args] + [c.fill for c in self.constants]
        exprs += [bound for fill in fills if fill is not None for bound in fill.bounds]
        return frozenset(name for expr in exprs if expr is not None for name in expr.names)

    def _values(self, params: Mapping[str, Number]) -> dict[str, Number]:
        values: dict[str, Number] = dict(params)
        for name, expr in self.macros:
            values[name] = value_of(expr, values, f"macro '{name}'")
        return values

    def to_json(self) -> dict:
        return {
            "name": self.name,
            **({"declared": self.declared} if self.instance_text else {}),
            "mangled_name": self.mangled_name,
            "grid": [one_line(e) for e in self.grid],
            "block": [one_line(e) for e in self.block],
            "shared": one_line(self.shared) if self.shared is not None else None,
            "args": [arg.to_json() for arg in self.args],
            **({"template": [arg.text for arg in self.template]} if self.template else {}),
            **({"tolerance": self.tolerance} if self.tolerance is not None else {}),
            **({"constants": [c.to_json() for c in self.constants]} if self.constants else {}),
            "location": self.location.to_json(),
        }


@dataclass(frozen=True)
class KernelConstant:
    """A namespace-scope `__constant__` variable of the user's files that its declaration leaves
    uninitialised: the host sets it (`cudaMemcpyToSymbol`), and kernel mode never runs the host,
    so the runner fills it before each configuration's first launch. Every such variable of the
    translation unit is taken as one the kernel may read.

    `symbol` is its name in the cubin; `dtype` its elements' numpy dtype; `count` how many
    elements the declaration holds as parsed (the cubin's size decides at run time: an array may
    be sized by a knob). `fill` is the user's rule (`constants(NAME = RULE)`), None for the
    default one. `why` says why it cannot be filled ("" when it can): then the cubin's zeros stay.
    """

    name: str  # qualified as C++ names it from the file: "ns::coef"
    symbol: str
    dtype: str
    ctype: str
    count: int
    location: Location
    fill: Fill | None = None
    why: str = ""

    def launched(self, values: Mapping[str, Number]) -> LaunchConstant:
        """The fill's bounds evaluated for one configuration; LaunchError as `KernelSpec.launch`."""
        fill = None
        if self.fill is not None:
            what = f"the fill of __constant__ '{self.name}'"
            bounds = tuple(value_of(b, values, what) for b in self.fill.bounds)
            fill = checked_fill(self.fill.rule, self.dtype, self.ctype, self.count, bounds, what)
        return LaunchConstant(self.name, self.symbol, self.dtype, fill)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "symbol": self.symbol,
            "type": self.ctype,
            **({"fill": self.fill.to_json()} if self.fill is not None else {}),
            **({"unfilled": self.why} if self.why else {}),
            "location": self.location.to_json(),
        }

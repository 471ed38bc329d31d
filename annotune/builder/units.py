"""One variant compiled by the user's compiler: what each translation unit reads, the units
that need a copy, the compile, the read-back of its tuned macros and what it depended on.

A program has one value per knob. A rewritten header reaches the tuned source through its copy,
but another unit of the command (`{source} file.c`, both including "header.h" beside them)
would find the original beside itself; such a unit is compiled from a copy too, made beside the
variant's copies with every file it reads under their root (`copy_unit`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from annotune.annotate import Problem
from annotune.annotate.source import ANNOTUNE_INCLUDE_DIR
from annotune.builder.compiler import CompilerCommand, CompileResult, run_compiler
from annotune.builder.dependencies import (
    Digests,
    command_files,
    command_inputs,
    dependency_flags,
    read_dependency_file,
)
from annotune.builder.entries import DEPENDENCY_FILE, PROGRAM, Batch, within
from annotune.builder.variants import (
    VariantSource,
    copies_first,
    needs_copy,
    original_include_dir,
    rewritten_originals,
    under_root,
    variant_source,
)
from annotune.builder.verify import (
    Tuned,
    check_values,
    dependency_command,
    source_inputs,
    tuned_macros,
)
from annotune.core.inputs import SOURCE, argument_path, read_input

_MACROS = "macros.txt"
_OUTSIDE = (
    " ({unit} is outside {root}, where annotune copies the files it compiles: move it there, "
    "or have it include the header through an -I directory)"
)


@dataclass
class Job:
    """One variant's compile in `scratch`. `units`: the command's translation units as it
    compiles them, the tuned source first; `copied`: each unit compiled from a copy, as the
    command names it, and its copy; `mirrored`: the directories (relative to the variant's
    root) of the files copied with them; `outside`: the units that needed a copy and lie
    outside that root; `reads`: the files each unit read (None: unknown)."""

    variant: VariantSource
    scratch: Path
    source: Path
    includes: list[str]
    units: list[str] = field(default_factory=list)
    copied: dict[str, str] = field(default_factory=dict)
    mirrored: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    reads: dict[str, list[str] | None] = field(default_factory=dict)
    seconds: float = 0.0  # the dependency lists'


class ProgramCompile:
    """The compiler's side of a builder: one variant's compile (`compile`), its macros read
    back in every unit (`checked`), the command it ran (`argv`) and its dependencies."""

    def __init__(
        self,
        problem: Problem,
        compiler: CompilerCommand,
        timeout: float,
        dependency_tracking: bool,
        originals: dict[str, bytes],
    ):
        self.problem = problem
        self.compiler = compiler
        self.timeout = timeout
        self.dependency_tracking = dependency_tracking
        self.originals = originals
        self.set_in = {  # a macro only a copy sets: the file that sets it
            p.name: os.path.realpath(p.value_span.file)
            for p in problem.params
            if needs_copy(p) and p.value_span is not None
        }

    def compile(self, job: Job, batch: Batch) -> CompileResult:
        """Compile `job`, learning what each translation unit read: from the compile itself
        (`-MD -MF`) when it has one, else from one `-M` run per unit first, where a unit that
        reads the original of a file the variant rewrites is given a copy (`copy_unit`)."""
        listing = job.scratch / DEPENDENCY_FILE
        main = argument_path(job.source)
        analysed = self.argv(job, job.scratch / PROGRAM, batch)
        job.units = list(dict.fromkeys([main, *source_inputs(analysed)]))
        several = len(job.units) > 1 and self.dependency_tracking
        if several:
            failed = self._read_units(job, batch)
            if failed is not None:
                return failed
        argv = self.argv(job, job.scratch / PROGRAM, batch, as_written=True)
        if self.dependency_tracking and not several:
            argv += dependency_flags(listing)
        result = run_compiler(argv, self.timeout)
        if not several:
            job.reads[main] = read_dependency_file(listing)
            listing.unlink(missing_ok=True)
        return replace(result, seconds=result.seconds + job.seconds)

    def _read_units(self, job: Job, batch: Batch) -> CompileResult | None:
        """Fill `job.reads` unit by unit, copying the units that would read another value than
        the variant's; a transient failure of a `-M` run (then the compile is not tried)."""
        rewritten = rewritten_originals(job.variant, self.originals)
        for index, unit in enumerate(list(job.units)):
            done, reads = self._reads(job, unit, batch)
            if done.transient:
                return done
            read = {os.path.realpath(path) for path in reads or ()}
            if index and read & rewritten and (copy := self.copy_unit(job, unit, reads)):
                job.units[index] = unit = copy
                done, reads = self._reads(job, copy, batch)
                if done.transient:
                    return done
            job.reads[unit] = reads
        return None

    def _reads(self, job: Job, unit: str, batch: Batch) -> tuple[CompileResult, list[str] | None]:
        """The `-M` run of one unit of the command, and the files it lists (None: it failed)."""
        listing = job.scratch / DEPENDENCY_FILE
        argv = self.argv(job, listing, batch)
        done = run_compiler(dependency_command(argv, unit), self.timeout)
        job.seconds += done.seconds
        reads = read_dependency_file(listing) if done.ok else None
        listing.unlink(missing_ok=True)
        return done, reads

    def copy_unit(self, job: Job, unit: str, reads: list[str] | None) -> str | None:
        """Copy `unit` and every file it reads under the variant's root (a rewritten one is
        already there) into the variant's copies, so that its quoted includes find the copies
        first as the tuned source's do; the copy's path, or None when `unit` lies outside the
        root (it keeps reading the original, and the read-back check names it)."""
        variant = job.variant
        relative = under_root(variant, unit)
        if relative is None:
            job.outside.append(unit)
            return None
        copies = job.scratch / "src"
        for path in [unit, *(reads or ())]:
            name = under_root(variant, path)
            if name is None or within(path, copies) or (copies / name).exists():
                continue
            (copies / name).parent.mkdir(parents=True, exist_ok=True)
            (copies / name).write_bytes(read_input(Path(path), SOURCE))
            job.mirrored.append(os.path.dirname(name))
        job.copied[unit] = copy = argument_path(copies / relative)
        return copy

    def argv(self, job: Job, output: Path, batch: Batch, as_written: bool = False) -> list[str]:
        """The compile of `job` into `output`: rewritten copies come before their originals on
        every include path, the units copied replace theirs. Response files are expanded
        (every unit in sight, as each run on one unit needs), but `as_written` keeps them as
        the user wrote them unless a unit they name was copied."""
        variant = job.variant
        argv = self.compiler.render(job.source, output, list(variant.defines), job.includes)
        if variant.rewritten:
            argv = copies_first(argv, variant, job.scratch / "src", job.mirrored)
        if as_written and not job.copied:
            return argv
        return [job.copied.get(arg, arg) for arg in batch.command.expand(argv)]

    def checked(self, compiled: CompileResult, job: Job, batch: Batch) -> CompileResult:
        """`compiled`, or why its program does not have the tuned values (`verify`), checked in
        each translation unit that reads them: the tuned source, every macro; another unit,
        the `-D` macros and those set in a file it read. One preprocessor run more per unit
        checked, counted in its time."""
        macros = tuned_macros(self.problem.params, job.variant.params)
        if not macros:
            return compiled
        dump = job.scratch / _MACROS
        argv = self.argv(job, dump, batch)
        seconds = compiled.seconds
        for index, unit in enumerate(job.units):
            read = self._macros_read(macros, job, unit) if index else macros
            if not read:
                continue
            named = unit if index else ""  # the tuned source's messages need no name
            checked = check_values(argv, unit, dump, read, self.timeout, named)
            dump.unlink(missing_ok=True)
            seconds += checked.seconds
            if not checked.ok:
                (job.scratch / PROGRAM).unlink(missing_ok=True)  # built from other values
                if unit in job.outside:
                    said = checked.error + _OUTSIDE.format(unit=unit, root=job.variant.root)
                    checked = replace(checked, error=said)
                return replace(checked, seconds=seconds)
        return replace(compiled, seconds=seconds)

    def _macros_read(self, macros: list[Tuned], job: Job, unit: str) -> list[Tuned]:
        """Those of `macros` that `unit` reads: a `-D` one, or one set in a file it read (all
        of them when what it read is unknown)."""
        reads = job.reads.get(unit)
        if reads is None:
            return macros
        read = {os.path.realpath(self._original(job, path)) for path in reads}
        return [m for m in macros if m.name not in self.set_in or self.set_in[m.name] in read]

    def _original(self, job: Job, path: str) -> str:
        """The user's file of which `path` is the variant's copy; `path` itself otherwise."""
        copies = job.scratch / "src"
        if not within(path, copies):
            return path
        return str(job.variant.root / os.path.relpath(os.path.abspath(path), copies))

    def dependencies(self, job: Job, batch: Batch, ok: bool) -> list[str]:
        """The files a compile depended on: every unit's list, each copy of a user's file as
        that file, less the variant's own (its key holds their bytes); what annotune knows
        where a list is missing, and added to them for a failed compile, which a new header
        in an include directory may mend: the variant's files, the include directories and
        forced includes, each other unit's directory (its quoted includes look there first)."""
        variant = job.variant
        paths: list[str] = []
        for listed in job.reads.values():
            for path in listed or ():
                original = self._original(job, path)
                if original == path or under_root(variant, original) not in variant.files:
                    paths.append(original)
        if not ok or None in job.reads.values():
            paths += [str(variant.root / name) for name in variant.files]
            paths += job.includes + command_inputs(batch.command.expand(self.compiler.argv))
            others = [self._original(job, unit) for unit in job.units[1:]]
            paths += [os.path.dirname(os.path.join(os.getcwd(), unit)) for unit in others]
        return paths

    def program_inputs(self, settled: dict[tuple[object, ...], bytes]) -> str:
        """A digest of every file the compile command reads beyond the tuned source's own
        files: the files it names (other sources, objects, libraries, response files) and the
        headers each other translation unit reads (one `-M` run each, on the originals); ""
        for a command that reads nothing else. A study's measurements belong to this digest
        too: they were of a program built from those bytes, and an edit of `other.c` makes
        another program. `settled`: the builder's memo of settled files' digests."""
        command = command_files(self.compiler.argv)
        digests = Digests(settled)
        files = list(command.files)
        with tempfile.TemporaryDirectory(prefix="annotune-inputs-") as scratch:
            listing = Path(scratch) / DEPENDENCY_FILE
            default = {p.name: p.default for p in self.problem.params}
            variant = variant_source(self.problem, default, self.originals)
            source = variant.root / variant.main
            argv = command.expand(
                self.compiler.render(
                    source, listing, list(variant.defines), compile_includes(self.problem, variant)
                )
            )
            main = argument_path(source)
            units = [u for u in source_inputs(argv) if u != main]
            for unit in dict.fromkeys(units if self.dependency_tracking else []):
                done = run_compiler(dependency_command(argv, unit), self.timeout)
                files += (read_dependency_file(listing) or []) if done.ok else [unit]
        if not files:
            return ""  # a command of one source: its files are the study's content already
        h = hashlib.sha256()
        for path in sorted(dict.fromkeys(os.path.abspath(f) for f in files)):
            h.update(os.fsencode(f"{path}\0{digests(path)}\n"))
        return h.hexdigest()


def compile_includes(problem: Problem, variant: VariantSource) -> list[str]:
    """The include directories annotune gives a variant's compile: its timing header's, the
    source's own, and the config's `include` (what libclang read too)."""
    return [str(ANNOTUNE_INCLUDE_DIR), original_include_dir(variant), *problem.include_dirs]

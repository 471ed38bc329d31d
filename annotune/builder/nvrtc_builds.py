"""Kernel mode's cubins compiled by NVRTC: the user's files sliced to their device code, keyed
by NVRTC's library, the options, the prelude and every sliced file's bytes.

An entry depends on the user's files (whose bytes the key already holds), annotune's include
directory and the toolkit's top-level headers (a toolkit update changes those), plus every
include directory for a failed compile, which a header added there may mend.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from annotune.annotate import Problem
from annotune.annotate.device_code import DeviceCode
from annotune.annotate.source import ANNOTUNE_INCLUDE_DIR
from annotune.builder.compiler import CompileResult, sm
from annotune.builder.dependencies import Digests
from annotune.builder.entries import (
    PROGRAM,
    fresh,
    install,
    located,
    save,
    scratch_beside,
    transient,
)
from annotune.builder.nvrtc import (
    NvrtcPool,
    NvrtcRequest,
    nvrtc_fingerprint,
    nvrtc_options,
    nvrtc_unavailable,
    nvrtc_version,
    toolkit_include_dirs,
    value_checks,
)
from annotune.builder.nvrtc_flags import NO_FLAGS, NvrtcFlags
from annotune.builder.variants import VariantSource, copies_first
from annotune.builder.verify import tuned_macros
from annotune.core.records import BuildResult

_PRELUDE = "annotune_nvrtc_prelude.h"


@dataclass(frozen=True)
class NvrtcSetup:
    """What every NVRTC compile of one builder shares."""

    arch: tuple[int, int]
    device_code: DeviceCode
    prelude: str
    version: str  # as people read it
    fingerprint: str  # what keys the cache
    toolkit: tuple[str, ...]  # the toolkit's include directories
    pool: NvrtcPool
    command: NvrtcFlags = NO_FLAGS  # what the compile command gives NVRTC


class NvrtcBuilds:
    """The NVRTC side of a builder: each variant's sliced files (`sliced`), its entry's key
    (`key`) and its compile (`compile`)."""

    def __init__(self, problem: Problem, setup: NvrtcSetup, timeout: float):
        self.problem = problem
        self.setup = setup
        self.timeout = timeout

    def identity(self, fallback: str) -> str:
        """NVRTC's version and architecture, what the compile command gives it and what not,
        and the nvcc command of its `fallback`."""
        arch = sm(self.setup.arch)
        given = self.setup.command.describe()
        given = f" ({given})" if given else ""
        return f"NVRTC {self.setup.version} --gpu-architecture={arch}{given}; fallback: {fallback}"

    def sliced(self, variant: VariantSource) -> dict[str, bytes]:
        """The variant's files sliced to their device code, the main one with the value checks
        of its tuned macros (NVRTC has no preprocess-only run to read them back)."""
        sliced = {
            name: self.setup.device_code.slice(os.path.join(variant.root, name), data)
            for name, data in variant.files.items()
        }
        checks = value_checks(tuned_macros(self.problem.params, variant.params))
        sliced[variant.main] += checks.encode()
        return sliced

    def compile(
        self,
        variant: VariantSource,
        sliced: dict[str, bytes],
        includes: list[str],
        instances: dict[str, str],
        entry: tuple[Path, str],
        digests: Digests,
    ) -> BuildResult:
        """NVRTC's build of `variant` from its sliced files, cached in the entry `(final, key)`;
        `instances`: the template kernels' (`Builder.instances`)."""
        nvrtc = self.setup
        final, key = entry
        scratch = scratch_beside(final, key)
        try:
            copies = scratch / "src"
            for name, data in sliced.items():
                (copies / name).parent.mkdir(parents=True, exist_ok=True)
                (copies / name).write_bytes(data)
            prelude = scratch / _PRELUDE
            prelude.write_text(nvrtc.prelude)
            flags = copies_first([f"-I{d}" for d in includes], variant, copies)
            options = nvrtc_options(nvrtc.arch, variant.defines, flags, str(prelude), nvrtc.command)
            main = copies / variant.main
            request = NvrtcRequest(
                str(main), sliced[variant.main], tuple(options), str(scratch / PROGRAM),
                self.timeout, tuple(instances.values()),
            )  # fmt: skip
            result, program = nvrtc.pool.compile(request)
            result = located(result, scratch, variant)
            result = replace(result, error=result.error.replace(str(prelude), "<NVRTC prelude>"))
            result = self._kernels_named(result, scratch / PROGRAM, instances)
            if result.transient:
                shutil.rmtree(scratch, ignore_errors=True)
                return transient(variant, result)
            dependencies = [*(str(variant.root / name) for name in variant.files)]
            dependencies += [str(ANNOTUNE_INCLUDE_DIR), *nvrtc.toolkit]
            if not result.ok:  # a header added to an include directory may mend it
                dependencies += includes
            save(scratch, result, digests.of(dependencies), program)
            prelude.unlink()
            install(scratch, final, variant, digests)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return fresh(final, variant)

    def _kernels_named(
        self, result: CompileResult, cubin: Path, instances: dict[str, str]
    ) -> CompileResult:
        """`result` with each template kernel's symbol (NVRTC lowered its instance), or a
        failure when NVRTC's cubin lacks a kernel under the name kernel mode launches it by:
        NVRTC's int64_t is `long long` (libcu++'s), glibc's `long`, so a kernel taking one
        has another mangled name, which the runner would not find."""
        if not result.ok:
            return result
        symbols = {}
        for kernel in self.problem.kernels:
            instance = instances.get(kernel.declared, "")
            symbol = result.symbols.get(instance, "") if instance else kernel.mangled_name
            if symbol not in result.resources:
                cubin.unlink(missing_ok=True)
                named = ", ".join(sorted(result.resources)) or "none"
                said = f"compile failed: NVRTC has no kernel {instance or symbol} (its: {named})"
                return CompileResult(False, result.seconds, said)
            if instance:
                symbols[kernel.declared] = symbol
        return replace(result, symbols=symbols)

    def key(
        self,
        variant: VariantSource,
        sliced: dict[str, bytes],
        includes: list[str],
        instances: dict[str, str],
    ) -> str:
        """NVRTC's library, the options but the scratch paths, the prelude, the template
        instances asked for and the sliced files' bytes (the main one with its value checks)."""
        nvrtc = self.setup
        options = nvrtc_options(nvrtc.arch, variant.defines, includes, "", nvrtc.command)
        named = "\0".join(f"{d}={i}" for d, i in instances.items())  # symbols are keyed by d
        h = hashlib.sha256(b"nvrtc")
        for part in (nvrtc.fingerprint, "\0".join(options), nvrtc.prelude, named, variant.main):
            h.update(b"\0" + part.encode(errors="surrogateescape"))
        for name in sorted(sliced):
            h.update(os.fsencode(name) + b"\0" + hashlib.sha256(sliced[name]).digest())
        return h.hexdigest()


def nvrtc_missing(problem: Problem, arch: tuple[int, int]) -> str:
    """Why NVRTC cannot compile `problem`'s kernels for `arch`; "" when it can."""
    if problem.device_code is None:
        return (
            "NVRTC needs the kernels' device code, which annotune did not find: kernels "
            "compile with nvcc"
        )
    return nvrtc_unavailable(arch)


def nvrtc_setup(
    problem: Problem, arch: tuple[int, int], jobs: int, command: NvrtcFlags = NO_FLAGS
) -> NvrtcSetup:
    """What every NVRTC compile of `problem` for `arch` shares, its pool of `jobs` workers
    started; `command`: what the user's compile command gives NVRTC."""
    assert problem.device_code is not None
    return NvrtcSetup(
        arch=arch,
        device_code=problem.device_code,
        prelude=problem.device_code.prelude,
        version=nvrtc_version(),
        fingerprint=nvrtc_fingerprint(),
        toolkit=tuple(toolkit_include_dirs()),
        pool=NvrtcPool(jobs),
        command=command,
    )

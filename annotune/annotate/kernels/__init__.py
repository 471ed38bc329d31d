"""Kernel mode's declarations: `#pragma annotune kernel` or a config's `[[file.kernel]]`, checked
against the kernel's signature (`specs`), typed (`parameters`; a template kernel's instance by a
second parse, `templates`), with the `__constant__` variables to fill (`constants`), from the
main file parsed again as CUDA (`cuda_parse`), into records (`records`) that compute each
configuration's launch (`launch`)."""

from __future__ import annotations

from annotune.annotate.kernels.cuda_parse import kernel_definitions, parse_cuda
from annotune.annotate.kernels.launch import Launch, LaunchArg, LaunchConstant, LaunchError
from annotune.annotate.kernels.records import (
    POINTER_KINDS,
    KernelArg,
    KernelConstant,
    KernelSpec,
    TemplateArg,
)
from annotune.annotate.kernels.specs import declares_kernels, kernel_specs

__all__ = [
    "POINTER_KINDS",
    "KernelArg",
    "KernelConstant",
    "KernelSpec",
    "Launch",
    "LaunchArg",
    "LaunchConstant",
    "LaunchError",
    "TemplateArg",
    "declares_kernels",
    "kernel_definitions",
    "kernel_specs",
    "parse_cuda",
]

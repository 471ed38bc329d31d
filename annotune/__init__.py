"""annotune: autotune the knobs marked in CUDA, OpenACC and OpenMP source.

The Python API (`annotune.api`; the guide's "Python API" page): `scan`, `tune`,
`tune_sizes`, `tune_ray`, `compile_only`, `build`, `build_per_arch`, `predict`,
`predict_size`, `report`, `check`, each keyword-only after the source, returning the record the CLI
prints; `AnnotuneError` is what bad input raises. Each is imported on first use, so that
`import annotune` (and `annotune build` on every `make`) pays for none of the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_API = {
    "scan": "annotune.api.scan",
    "Scan": "annotune.api.scan",
    "tune": "annotune.api.tune",
    "tune_sizes": "annotune.api.tune",
    "tune_ray": "annotune.api.tune",
    "compile_only": "annotune.api.tune",
    "build": "annotune.api.build",
    "build_per_arch": "annotune.api.build",
    "Build": "annotune.api.build",
    "ArchBuild": "annotune.api.build",
    "check": "annotune.api.check",
    "Check": "annotune.api.check",
    "predict": "annotune.api.predict",
    "predict_size": "annotune.api.predict",
    "report": "annotune.api.report",
    "Report": "annotune.api.report",
    "AnnotuneError": "annotune.core.diagnostics",
    "TuneReport": "annotune.session.report",
    "TuneStatus": "annotune.session.report",
    "TuneProgress": "annotune.session.report",
    "SizesReport": "annotune.session.sizes",
    "CompileReport": "annotune.session.compile_only",
    "PredictReport": "annotune.transfer.prior",
    "SizePrediction": "annotune.transfer.sizes",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str) -> Any:
    """`annotune.tune` and the rest, imported from their module when first asked for."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'annotune' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

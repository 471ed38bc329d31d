"""Device features for any GPU name: the user's table, the shipped one, the live device, and
for a GPU known nowhere, the nearest known GPU of its vendor and architecture.

Transfer must never stop because one GPU is new (issue 22): new GPUs appear every year, and a
user cannot wait for a release to add a row to gpus.toml. So `resolve` always answers, in
this order:

1. the live device, when the name is this machine's GPU (`live_device.read_from_device`);
2. the user's entry (`--gpus FILE`, or `[[gpu]]` in annotune.toml / `[[tool.annotune.gpu]]` in
   pyproject.toml), laid field by field over the shipped entry of the same name; a user entry
   may give only some fields;
3. the shipped table (`features.lookup`);
4. what the name tells (`infer_family`: vendor, architecture, compute capability), with every
   other field taken from the nearest known GPU of the same vendor (same architecture family
   first, then the closest compute capability, then the closest model number), and a warning
   that names that GPU and the fields it stood in for;
5. with no known GPU of that vendor (or no vendor in the name), only the fields known, and a
   warning: the model then uses the features every GPU of the group has (`shared_names`).

Every fallback is said: a `Resolved` carries its warnings, and the commands print them.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

from annotune.core.diagnostics import AnnotuneError, Location
from annotune.core.inputs import CONFIG, read_text
from annotune.core.toml import Positions, parse_toml
from annotune.run import device as devices
from annotune.transfer import features as known
from annotune.transfer import live_device
from annotune.transfer.features import FEATURE_NAMES, DeviceFeatures

if TYPE_CHECKING:
    from annotune.results.replay import ReplayDataset

# --- the user's table ---

_TEXT_KEYS = {"name": str, "architecture": str}
_ENTRY_KEYS = ("name", "aliases", "architecture", *FEATURE_NAMES)


@dataclass(frozen=True)
class UserGpu:
    """One `[[gpu]]` entry of the user's: any of gpus.toml's fields, only `name` required.

    `values` holds the numeric fields given (read-only); `location` is its `[[gpu]]` line.
    """

    name: str
    aliases: tuple[str, ...]
    architecture: str | None
    values: Mapping[str, float] = field(hash=False)
    location: Location

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))


@dataclass(frozen=True)
class GpuTable:
    """The user's GPU entries; a later entry of the same name wins over an earlier one, and
    every one over the shipped entry of its name. Empty: the shipped table alone."""

    entries: tuple[UserGpu, ...] = ()

    def find(self, name: str) -> UserGpu | None:
        """The last entry whose name or an alias is `name` (compared as `features.lookup`
        compares), or None."""
        key = known.name_key(name)
        if not key:
            return None
        for entry in reversed(self.entries):
            if key in {known.name_key(n) for n in (entry.name, *entry.aliases)}:
                return entry
        return None

    def complete(self) -> tuple[DeviceFeatures, ...]:
        """Every GPU whose features are all known: the user's (merged over the shipped entry
        of the same name), then the shipped ones the user did not describe."""
        found: dict[str, DeviceFeatures] = {}
        for entry in self.entries:
            merged = _merged(entry.name, entry, known.lookup(entry.name))
            if merged is not None:
                found[known.name_key(merged.name)] = merged
        for shipped in known.table():
            found.setdefault(known.name_key(shipped.name), shipped)
        return tuple(found.values())


def user_table(gpus_file: Path | None = None, config: Path | None = None) -> GpuTable:
    """The user's GPUs: `[[gpu]]` of the config file (annotune.toml, or `[[tool.annotune.gpu]]`
    in a pyproject.toml), then those of `gpus_file` (which win). Each is checked: a located
    AnnotuneError for invalid TOML, an unknown field, a wrong type or a missing name."""
    entries: list[UserGpu] = []
    if config is not None and config.is_file():
        top = ("tool", "annotune") if config.name == "pyproject.toml" else ()
        entries += read_gpu_entries(config, top=top, others_allowed=True)
    if gpus_file is not None:
        entries += read_gpu_entries(gpus_file)
    return GpuTable(tuple(entries))


def read_gpu_entries(
    path: Path, *, top: tuple[str, ...] = (), others_allowed: bool = False
) -> list[UserGpu]:
    """The `[[gpu]]` entries under the table `top` of the TOML file `path`, checked.

    `others_allowed`: other keys may sit beside `gpu` (a config file's `[[file]]`); in a file
    named by --gpus, anything but `[[gpu]]` is a mistake and reported.
    """
    text = read_text(path, CONFIG)
    data = parse_toml(text, path)
    where = _Where(path, text, top)
    for part in top:
        data = data.get(part, {}) if isinstance(data, dict) else {}
    if not isinstance(data, dict):
        return []
    if not others_allowed:
        for key in data:
            if key != "gpu":
                raise AnnotuneError(
                    f"unknown key {key!r} in a GPU table (expected [[gpu]] entries)",
                    where.key(None, key),
                )
    entries = data.get("gpu", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise AnnotuneError("'gpu' must be an array of tables ([[gpu]])", where.entry(0))
    return [_entry(entry, index, where) for index, entry in enumerate(entries)]


def _entry(entry: dict, index: int, where: _Where) -> UserGpu:
    for key in entry:
        if key not in _ENTRY_KEYS:
            close = difflib.get_close_matches(key, _ENTRY_KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else "see annotune/transfer/gpus.toml"
            raise AnnotuneError(f"unknown field {key!r} in [[gpu]] ({hint})", where.key(index, key))
    name = entry.get("name")
    if not isinstance(name, str) or not known.name_key(name):
        at = where.value(index, "name") if "name" in entry else where.entry(index)
        raise AnnotuneError('each [[gpu]] needs a name = "..." (the GPU\'s name)', at)
    for key, kind in _TEXT_KEYS.items():
        if key in entry and not isinstance(entry[key], kind):
            raise AnnotuneError(f"{key} must be a string", where.value(index, key))
    aliases = entry.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise AnnotuneError("aliases must be a list of strings", where.value(index, "aliases"))
    values = {}
    for key in FEATURE_NAMES:
        if key not in entry:
            continue
        value = entry[key]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or value < 0:
            raise AnnotuneError(
                f"{key} must be a finite number, 0 or more (units as in gpus.toml), not {value!r}",
                where.value(index, key),
            )
        if key == "vendor_nvidia" and value not in (0, 1):
            raise AnnotuneError("vendor_nvidia must be 1 or 0", where.value(index, key))
        values[key] = float(value)
    return UserGpu(name, tuple(aliases), entry.get("architecture"), values, where.entry(index))


class _Where:
    """Where each `[[gpu]]` entry under `top`, and each key of it, is written."""

    def __init__(self, path: Path, text: str, top: tuple[str, ...]):
        self._positions = Positions(path, text)
        self._top = top

    def entry(self, index: int) -> Location:
        return self._positions.key((*self._top, "gpu", index))

    def key(self, index: int | None, key: str) -> Location:
        at = (key,) if index is None else ("gpu", index, key)
        return self._positions.key((*self._top, *at))

    def value(self, index: int, key: str) -> Location:
        return self._positions.value((*self._top, "gpu", index, key))


# --- what a name tells ---


@dataclass(frozen=True)
class Family:
    """What a GPU's name tells: its vendor ("NVIDIA" or "AMD"), and when recognised its
    architecture in gpus.toml's words ("RDNA3 (gfx1100)") and compute capability (NVIDIA's, or
    AMD's GFXIP major.minor, as gpus.toml writes it)."""

    vendor: str
    architecture: str | None = None
    capability: float | None = None

    @property
    def generation(self) -> str | None:
        """The architecture's family without its target: "RDNA3", "Ampere"."""
        return self.architecture.split(" (")[0] if self.architecture else None


# (pattern on the name's words, architecture, capability), first match wins. The words are
# the lower-case name with letters and digits split apart: "RTX5090" -> "rtx 5090",
# "MI250X" -> "mi 250 x", "W7800" -> "w 7800".
_NVIDIA = (
    (r"\bg?b ?[123]00\b", "Blackwell (sm_100)", 10.0),
    (r"\brtx (?:50\d\d|pro \d+ blackwell)\b|\bblackwell\b", "Blackwell (sm_120)", 12.0),
    (r"\bg?h (?:100|200|800|20)\b", "Hopper (sm_90)", 9.0),
    (r"\brtx 40\d\d\b|\bl (?:4|40|40 s|20)\b|\bada\b", "Ada Lovelace (sm_89)", 8.9),
    (r"\ba (?:100|30|800)\b", "Ampere (sm_80)", 8.0),
    (r"\brtx (?:30\d\d|a \d+)\b|\ba (?:2|10|10 g|16|40)\b", "Ampere (sm_86)", 8.6),
    (r"\brtx 20\d\d\b|\bgtx 16\d\d\b|\btitan rtx\b|\bt 4\b|\bquadro rtx\b", "Turing (sm_75)", 7.5),
    (r"\bv 100\b|\btitan v\b", "Volta (sm_70)", 7.0),
    (r"\bp 100\b", "Pascal (sm_60)", 6.0),
    (r"\bgtx 10\d\d\b|\bp (?:4|40)\b|\btitan x", "Pascal (sm_61)", 6.1),
)
_AMD = (
    (r"\bmi 35\d\b", "CDNA4 (gfx950)", 9.5),
    (r"\bmi 3[02]\d\b", "CDNA3 (gfx942)", 9.4),
    (r"\bmi 2[15]0\b", "CDNA2 (gfx90a)", 9.0),
    (r"\bmi 100\b", "CDNA (gfx908)", 9.0),
    (r"\bmi [56]0\b|\bradeon vii\b", "GCN5.1 (gfx906)", 9.0),
    (r"\b(?:rx|r) 9\d{3}\b", "RDNA4 (gfx1201)", 12.0),
    (r"\b(?:rx|w|v) 7\d{3}\b", "RDNA3 (gfx1100)", 11.0),
    (r"\b(?:rx|w) 6\d{3}\b", "RDNA2 (gfx1030)", 10.3),
    (r"\b(?:rx|w) 5\d{3}\b", "RDNA (gfx1010)", 10.1),
)
_NVIDIA_WORDS = re.compile(r"\b(?:nvidia|geforce|tesla|quadro|rtx|gtx|titan)\b")
_AMD_WORDS = re.compile(r"\b(?:amd|ati|radeon|instinct|mi \d+)\b")


def _words(name: str) -> str:
    return " ".join(known._WORDS.findall(known._MARKS.sub(" ", name.lower())))


def infer_family(name: str) -> Family | None:
    """The vendor and architecture a GPU's name tells, by the rules above (`_NVIDIA`,
    `_AMD`): e.g. "AMD Radeon PRO W7800" -> AMD, RDNA3 (gfx1100), 11.0; "NVIDIA GeForce RTX
    5090" -> NVIDIA, Blackwell (sm_120), 12.0. A vendor word with no known model gives the
    vendor alone; None when the name tells neither."""
    words = _words(name)
    for vendor, rules in (("AMD", _AMD), ("NVIDIA", _NVIDIA)):
        for pattern, architecture, capability in rules:
            if re.search(pattern, words):
                return Family(vendor, architecture, capability)
    if _AMD_WORDS.search(words):
        return Family("AMD")
    if _NVIDIA_WORDS.search(words):
        return Family("NVIDIA")
    return None


def _architecture_family(architecture: str | None) -> Family | None:
    """What an architecture written as gpus.toml writes it tells: "Ampere (sm_80)" is an
    NVIDIA GPU of compute capability 8.0, "RDNA3 (gfx1100)" an AMD one."""
    found = re.search(r"\bsm_(\d+)(\d)\b", architecture or "")
    if found:
        return Family("NVIDIA", architecture, int(found.group(1)) + int(found.group(2)) / 10)
    if re.search(r"\bgfx\d", architecture or ""):
        return Family("AMD", architecture)
    return None


def _vendor(features: DeviceFeatures) -> str:
    return "NVIDIA" if features.values["vendor_nvidia"] else "AMD"


def _model_number(name: str) -> float | None:
    numbers = [int(n) for n in re.findall(r"\d+", _words(name)) if len(n) >= 2]
    return float(max(numbers)) if numbers else None


def nearest_known(
    name: str, family: Family, candidates: Iterable[DeviceFeatures]
) -> DeviceFeatures | None:
    """The candidate nearest to the GPU `name` of `family`: of the same vendor, then of the
    same architecture family, then the closest compute capability, then the closest model
    number in the name ("W7700" is nearer "W7800" than "RX 7600"); the first in table order
    among equals. None when no candidate is of that vendor."""
    number = _model_number(name)

    def distance(entry: DeviceFeatures) -> tuple[bool, float, float]:
        generation = entry.architecture.split(" (")[0]
        capability = entry.values["compute_capability"]
        other = _model_number(entry.name)
        return (
            family.generation is None or generation != family.generation,
            abs(capability - family.capability) if family.capability is not None else 0.0,
            abs(number - other) if number is not None and other is not None else math.inf,
        )

    same = [c for c in candidates if _vendor(c) == family.vendor]
    return min(same, key=distance) if same else None


# --- resolving a name ---


@dataclass(frozen=True)
class Resolved:
    """A GPU's device features as far as they are known, and how they were found.

    `values` may lack features (`missing`) only when nothing stood in for them. `source` is
    "device", "user", "table", "stand-in" (`stand_in` names the GPU whose features filled the
    gaps) or "name" (only what the name tells); `warnings` say every fallback.
    """

    name: str
    architecture: str
    values: Mapping[str, float] = field(hash=False)
    source: str
    stand_in: str | None = None
    missing: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    def features(self) -> DeviceFeatures | None:
        """As `DeviceFeatures`, when every feature has a value (its own or a stand-in's)."""
        if any(n not in self.values for n in FEATURE_NAMES):
            return None
        source = self.source if self.source in known.SOURCES else "stand-in"
        return DeviceFeatures(self.name, self.architecture, self.values, source)

    def vector(self, names: Sequence[str]) -> np.ndarray:
        return np.array([self.values[n] for n in names], dtype=np.float64)


def from_features(features: DeviceFeatures) -> Resolved:
    """A complete set of features (a file's own, a study's) as a `Resolved`."""
    return Resolved(features.name, features.architecture, features.values, features.source)


def resolve(name: str, table: GpuTable | None = None, *, live: bool = True) -> Resolved:
    """The device features of the GPU called `name`, never failing (see the module
    docstring for the order). `live`: read the device when `name` is this machine's GPU."""
    table = table or GpuTable()
    if name.startswith(devices.CPU_PREFIX) and table.find(name) is None:
        # "cpu-AMD EPYC" names a host processor: no GPU of its vendor may stand in for it.
        warning = (
            f"'{name}' is a host processor, not a GPU: transfer uses no device features for "
            "it (describe it with --gpus FILE or a [[gpu]] entry to give it some)"
        )
        return Resolved(name, "host", {}, "name", None, FEATURE_NAMES, (warning,))
    if live and known.name_key(name) and name.strip() == devices.gpu_name():
        reading = live_device.read_from_device(0)
        if reading is not None and known.name_key(reading.name) == known.name_key(name):
            return from_features(reading)
    shipped = known.lookup(name)
    entry = table.find(name) or (table.find(shipped.name) if shipped else None)
    merged = _merged(name, entry, shipped)
    if merged is not None:
        return from_features(merged)
    values = dict(shipped.values) if shipped else {}
    values.update(entry.values if entry else {})
    architecture = (entry.architecture if entry else None) or (
        shipped.architecture if shipped else None
    )
    family = infer_family(name) or _architecture_family(architecture)
    if family is not None:
        values.setdefault("vendor_nvidia", float(family.vendor == "NVIDIA"))
        if family.capability is not None:
            values.setdefault("compute_capability", family.capability)
        architecture = architecture or family.architecture
    missing = tuple(n for n in FEATURE_NAMES if n not in values)
    told = "its [[gpu]] entry gives" if entry else "its name tells"
    stand = nearest_known(name, family, table.complete()) if family else None
    if stand is not None:
        filled = {**stand.values, **values}
        kind = f"{family.vendor} {family.generation or ''}".strip()
        warning = (
            f"no device features known for '{name}': using those of '{stand.name}' (the "
            f"nearest known {kind} GPU) for {', '.join(missing)}; {told} the rest. "
            "Add it with --gpus FILE or a [[gpu]] entry in annotune.toml"
        )
        return Resolved(
            name,
            architecture or stand.architecture,
            filled,
            "stand-in",
            stand.name,
            missing,
            (warning,),
        )
    have = [n for n in FEATURE_NAMES if n in values]
    why = f"no known {family.vendor} GPU" if family else "its vendor is not in its name"
    warning = (
        f"no device features known for '{name}' and {why}: transfer uses only "
        f"{', '.join(have) or 'no device feature'} (missing {', '.join(missing)}). "
        "Add it with --gpus FILE or a [[gpu]] entry in annotune.toml"
    )
    return Resolved(name, architecture or "unknown", values, "name", None, missing, (warning,))


def _merged(
    name: str, entry: UserGpu | None, shipped: DeviceFeatures | None
) -> DeviceFeatures | None:
    """The user's entry laid over the shipped one, when that gives every feature."""
    if entry is None:
        return shipped
    values = {**(shipped.values if shipped else {}), **entry.values}
    architecture = entry.architecture or (shipped.architecture if shipped else None)
    if architecture is None:
        family = infer_family(name)
        architecture = family.architecture if family else None
    if architecture is None or any(n not in values for n in FEATURE_NAMES):
        return None
    return DeviceFeatures(entry.name, architecture, values, "user")


def resolve_dataset(dataset: ReplayDataset, table: GpuTable | None = None) -> Resolved:
    """A results file's GPU: its own features (T4 metadata written by `annotune export`), else
    the user's or shipped entry of the name it gives or its name's last part
    ("convolution_MI250X"), else `resolve`'s fallback for the name. ValueError when the file's
    own features are malformed."""
    if dataset.device_features is not None:
        return from_features(DeviceFeatures.from_json(dataset.device_features))
    names = [n for n in (dataset.device, dataset.name.rsplit("_", 1)[-1]) if known.name_key(n)]
    for name in names:
        found = resolve(name, table, live=False)
        if found.source in ("user", "table"):
            return found
    return resolve(known.dataset_device(dataset), table, live=False)


def shared_names(resolved: Iterable[Resolved]) -> tuple[str, ...]:
    """The features every one of `resolved` has, in FEATURE_NAMES order: what a model over
    them can use."""
    every = list(resolved)
    return tuple(n for n in FEATURE_NAMES if all(n in r.values for r in every))

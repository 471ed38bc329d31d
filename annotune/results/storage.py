"""The storage contract: what a tune (`annotune.session`) relies on of the store its
measurements go to, so that the session holds a `Storage` rather than the SQLite `Database`,
which is the one implementation (`tests/results/test_storage_contract.py` checks each one).

What the contract promises, whatever holds the measurements:

* what is recorded is read back, whole (`record`, then `measurements` and `lookup`), and a
  store opened again on the same place sees every study and measurement recorded before;
* a configuration is recorded once: recording it again keeps the first and returns False;
* a claim is given to one tune at a time: while it stands (its owner alive, its lifetime not
  passed) another tune's claim is refused, and so is a claim on a measured configuration;
  recording the configuration, or its owner releasing it, ends the claim;
* `fresh` starts a study's measurements over, `forget_failures` drops the failed ones only;
  both forget the study's final checks, which a rerun that measures nothing reads back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from annotune.core.records import Measurement
from annotune.results.claims import Owner
from annotune.results.keys import Study, StudyKey


@runtime_checkable
class Storage(Protocol):
    """The methods the session calls on its store (`plan.Instruments`, `study.Store`), and
    `studies`, which the store the session hands to `transfer.prior.gather_prior` is asked
    (`results.studies.studies_elsewhere`) to learn from other GPUs' studies."""

    def open_study(
        self,
        key: StudyKey,
        *,
        fresh: bool = False,
        device_features: Mapping[str, Any] | None = None,
    ) -> Study:
        """The study with this key, created if new; `fresh` deletes its measurements first.
        `device_features` are stored with a new study, or one that has none yet."""
        ...

    def studies(self) -> list[Study]:
        """Every study in the store, oldest first."""
        ...

    def measurements(self, study: Study) -> list[Measurement]:
        """The study's measurements in the order they were recorded."""
        ...

    def lookup(self, study: Study, params: Mapping[str, Any]) -> Measurement | None:
        """The measurement of this configuration, if the study holds one."""
        ...

    def record(self, study: Study, measurement: Measurement) -> bool:
        """Store one measurement for good and end any claim on its configuration; False, the
        first one kept, when the study holds the configuration already. A transient failure
        is refused (ValueError)."""
        ...

    def claim(
        self, study: Study, params: Mapping[str, Any], owner: Owner, *, lifetime: float
    ) -> bool:
        """Claim a configuration for `owner` to measure, for `lifetime` seconds; False when it
        is measured already or another owner's claim on it stands."""
        ...

    def release(self, study: Study, params: Mapping[str, Any], owner: Owner) -> None:
        """End `owner`'s claim on a configuration it will not record."""
        ...

    def forget_failures(self, study: Study) -> list[Measurement]:
        """Delete the study's failed measurements and return them (and its final checks)."""
        ...

    def final_check(self, study: Study, key: str) -> tuple[dict, str] | None:
        """The final check's verdict stored under `key` and when, None when there is none."""
        ...

    def record_final_check(self, study: Study, key: str, verdict: Mapping[str, Any]) -> None:
        """Keep a final check's verdict under `key`, replacing one stored before."""
        ...

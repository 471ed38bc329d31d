"""Measurement's energy beside its time, and the value each objective minimises."""

from __future__ import annotations

import pytest

from annotune.core.records import OBJECTIVE_UNITS, OBJECTIVES, Measurement, objective_value


def test_energy_is_validated_like_time():
    m = Measurement({"A": 1}, "ok", 2.0, times=(2.0,), energy=0.5, energies=(0.4, 0.5, 0.6))
    assert m.energy_interval is None  # three samples are too few for an interval
    with pytest.raises(ValueError, match="exactly when its samples are"):
        Measurement({"A": 1}, "ok", 2.0, energy=0.5)
    with pytest.raises(ValueError, match="exactly when its samples are"):
        Measurement({"A": 1}, "ok", 2.0, energies=(0.5,))
    with pytest.raises(ValueError, match="only an 'ok' measurement"):
        Measurement({"A": 1}, "timeout", energy=0.5, energies=(0.5,))
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite and positive"):
            Measurement({"A": 1}, "ok", 2.0, energy=0.5, energies=(0.5, bad))
    with pytest.raises(ValueError, match="finite and positive"):
        Measurement({"A": 1}, "ok", 2.0, energy=0.0, energies=(0.5,))


def test_objective_values_and_their_units():
    m = Measurement({"A": 1}, "ok", 4.0, energy=0.25, energies=(0.25,))
    assert [objective_value(m, o) for o in OBJECTIVES] == [4.0, 0.25, 0.25 * 4e-3]
    assert OBJECTIVE_UNITS == {"time": "ms", "energy": "J", "edp": "J*s"}
    unmetered = Measurement({"A": 1}, "ok", 4.0)
    assert [objective_value(unmetered, o) for o in OBJECTIVES] == [4.0, None, None]
    failed = Measurement({"A": 1}, "runtime_error", error="crashed")
    assert [objective_value(failed, o) for o in OBJECTIVES] == [None, None, None]
    with pytest.raises(ValueError, match="objective must be one of"):
        objective_value(m, "power")

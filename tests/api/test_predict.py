"""`annotune.predict` and `predict_size`: what cannot be predicted is said, not guessed."""

from __future__ import annotations

import pytest

import annotune


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "k.c"
    path.write_text("#ifndef B\n#define B 8 // @tune values(4, 8, 16)\n#endif\nint x = B;\n")
    return path


def test_predict_without_other_gpus_results_is_refused(source):
    with pytest.raises(annotune.AnnotuneError):
        annotune.predict(source, device="NVIDIA H100 80GB HBM3")


def test_predict_size_takes_one_size(source):
    with pytest.raises(annotune.AnnotuneError, match="one size at a time"):
        annotune.predict_size(source, size="N=32,64")

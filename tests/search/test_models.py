"""The regression models behind IterML: every one swappable, seeded and chunk-safe."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from annotune.search import models
from annotune.search.models import MODEL_NAMES, Surrogate, encode_features


def data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 9, size=(n, 3)).astype(float)
    y = np.log(1.0 + (x[:, 0] - 5) ** 2 + 0.5 * x[:, 1])
    return x, y


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_builtin_model_fits_and_predicts(name):
    x, y = data()
    model = Surrogate(name).fit(x[:200], y[:200], np.random.default_rng(0))
    prediction = model.predict(x[200:])
    assert prediction.mean.shape == (100,)
    assert np.all(np.isfinite(prediction.mean))
    if name in ("rf", "et", "cart", "gbt"):  # the flexible models learn this easily
        assert np.corrcoef(prediction.mean, y[200:])[0, 1] > 0.8


def test_any_regressor_is_cloned_and_used():
    x, y = data()
    template = Ridge(alpha=1.0)
    model = Surrogate(template).fit(x, y, np.random.default_rng(0))
    assert model.model_ is not template and not hasattr(template, "coef_")
    assert model.predict(x).mean.shape == (300,)


def test_same_generator_same_model():
    x, y = data()
    a = Surrogate("rf").fit(x, y, np.random.default_rng(5)).predict(x).mean
    b = Surrogate("rf").fit(x, y, np.random.default_rng(5)).predict(x).mean
    c = Surrogate("rf").fit(x, y, np.random.default_rng(6)).predict(x).mean
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_chunked_prediction_equals_whole(monkeypatch):
    x, y = data()
    model = Surrogate("rf").fit(x, y, np.random.default_rng(0))
    whole = model.predict(x, with_std=True)
    monkeypatch.setattr(models, "PREDICT_CHUNK", 7)
    chunked = model.predict(x, with_std=True)
    assert np.allclose(whole.mean, chunked.mean) and np.allclose(whole.std, chunked.std)
    assert whole.std is not None and whole.std.min() >= 0
    sample = model.sample(x, np.random.default_rng(1))
    assert sample.shape == (300,) and not np.allclose(sample, whole.mean)


@pytest.mark.parametrize("name", ["rf", "gbt"])
def test_checked_once_fits_the_same_trees_as_every_check(name):
    """Skipping scikit-learn's repeated checks for a built-in model changes no tree."""
    x, y = data()
    quick = Surrogate(name).fit(x, y, np.random.default_rng(3)).predict(x, with_std=True)
    template = models.make_regressor(name)  # a user's regressor: every check kept
    checked = Surrogate(template).fit(x, y, np.random.default_rng(3)).predict(x, with_std=True)
    assert np.array_equal(quick.mean, checked.mean)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_checked_once_still_refuses_nan_and_infinity(bad):
    x, y = data()
    y[4] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        Surrogate("rf").fit(x, y, np.random.default_rng(0))
    x[7, 1] = bad
    with pytest.raises(ValueError, match="NaN or infinity"), models.checked_once(x):
        pass


def test_predict_before_fit_and_unknown_name():
    with pytest.raises(RuntimeError):
        Surrogate("rf").predict(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="unknown model"):
        Surrogate("xgboost").fit(np.zeros((4, 1)), np.zeros(4), np.random.default_rng(0))


def test_encoding_logs_wide_columns_adds_alignment_and_drops_constants():
    values = np.array([[16, 1, 7, 0.5], [48, 2, 7, 0.25], [64, 3, 7, 0.5]], dtype=float)
    encoded = encode_features(values)
    # block (16..64, logged), small int (1..3, kept), constant dropped, float (kept), and
    # the power-of-two alignment of the block column: 16 -> 4, 48 -> 4, 64 -> 6.
    assert encoded.shape == (3, 4)
    assert np.allclose(encoded[:, 0], np.log2([16, 48, 64]))
    assert np.allclose(encoded[:, 1], [1, 2, 3])
    assert np.allclose(encoded[:, 3], [4, 4, 6])

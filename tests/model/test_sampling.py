"""The seeded sampler (mtlinv.model.sampling): its draws follow softmax(logits / T) over the kept tokens (a
chi-square test over many positions, with a negative control that the test rejects a wrong distribution), its
masks keep what they document, and a choice depends on (logits, seed, position) alone."""
import numpy as np
import pytest

from mtlinv.model.sampling import MIN_TEMPERATURE, Sampler, gumbel

LOGITS = np.array([1.0, 0.5, 0.0, -0.5, 2.0, -1.0, 1.5, 0.25])
DRAWS = 20_000
# chi2.ppf(0.999, df) (scipy.stats): a correct sampler exceeds it with probability 1e-3; the seed is fixed, so the
# test is deterministic and passes or fails the same way every run.
CHI2_999 = {1: 10.828, 2: 13.816, 3: 16.266, 4: 18.467, 5: 20.515, 6: 22.458, 7: 24.322}


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def counts(sampler, logits=LOGITS, n=DRAWS):
    return np.bincount([sampler.choose(logits, p) for p in range(n)], minlength=len(logits))


def chi_square(observed, probs):
    """Pearson's statistic over the categories of nonzero probability, and its degrees of freedom."""
    kept = probs > 0
    expected = probs[kept] * observed.sum()
    return float((((observed[kept] - expected) ** 2) / expected).sum()), int(kept.sum()) - 1


@pytest.fixture(scope="module")
def draws_t07():
    return counts(Sampler(temperature=0.7, seed=1234))


def test_draws_follow_the_softmax(draws_t07):
    stat, df = chi_square(draws_t07, softmax(LOGITS / 0.7))
    assert stat < CHI2_999[df], f"chi-square {stat:.1f} with {df} degrees of freedom"


@pytest.mark.parametrize("wrong_t", [1.0, 0.8])
def test_chi_square_rejects_a_wrong_distribution(draws_t07, wrong_t):
    """Negative control: the same draws against the softmax at another temperature fail the test."""
    stat, df = chi_square(draws_t07, softmax(LOGITS / wrong_t))
    assert stat > CHI2_999[df], f"chi-square {stat:.1f}: the test cannot tell T=0.7 from T={wrong_t}"


@pytest.mark.parametrize("kwargs, kept", [
    (dict(top_k=3), [0, 4, 6]),
    (dict(top_p=0.6), [4, 6]),  # at T 1: p(4) = 0.38, p(6) = 0.23, p(0) = 0.14; 0.38 < 0.6 <= 0.61
    (dict(min_p=0.3), [0, 4, 6]),  # p >= 0.3 * 0.38
    (dict(top_k=5, top_p=0.9, min_p=0.25), [0, 4, 6]),  # top_k: 0 1 4 6 7; top_p drops 7; min_p 1 (0.095 < 0.25 * 0.42)
])
def test_masked_draws_follow_the_renormalised_softmax(kwargs, kept):
    sampler = Sampler(temperature=1.0, seed=7, **kwargs)
    assert np.flatnonzero(sampler.kept(LOGITS)).tolist() == kept
    observed = counts(sampler, n=10_000)
    assert observed[np.setdiff1d(np.arange(len(LOGITS)), kept)].sum() == 0, "a masked token was drawn"
    probs = np.where(sampler.kept(LOGITS), softmax(LOGITS), 0.0)
    stat, df = chi_square(observed, probs / probs.sum())
    assert stat < CHI2_999[df], f"chi-square {stat:.1f} with {df} degrees of freedom"


def test_top_k_keeps_ties_and_top_p_reaches_p():
    s = Sampler(temperature=1.0, top_k=2)
    assert s.kept(np.array([3.0, 1.0, 3.0, 3.0])).tolist() == [True, False, True, True]
    # top_p: the fewest most probable tokens whose probability reaches p; the one that crosses it is kept.
    p = np.array([0.5, 0.3, 0.2])
    assert Sampler(temperature=1.0, top_p=0.5).kept(np.log(p)).tolist() == [True, False, False]
    assert Sampler(temperature=1.0, top_p=0.51).kept(np.log(p)).tolist() == [True, True, False]


def test_a_choice_depends_on_seed_and_position_only():
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(1000)
    s = Sampler(temperature=1.0, seed=42)
    forward = [s.choose(logits, p) for p in range(50)]
    backward = [s.choose(logits, p) for p in reversed(range(50))][::-1]
    assert forward == backward, "the order of the draws changed them"
    assert s(np.stack([logits] * 3), [7, 3, 9]) == [forward[7], forward[3], forward[9]]
    other_seed = [Sampler(temperature=1.0, seed=43).choose(logits, p) for p in range(50)]
    assert other_seed != forward and len(set(forward)) > 10
    assert np.array_equal(gumbel(42, 5, 16), gumbel(42, 5, 16))
    assert not np.array_equal(gumbel(42, 5, 16), gumbel(42, 6, 16))


def test_temperature_zero_is_greedy():
    logits = np.array([0.0, 3.0, 3.0, 1.0])
    assert [Sampler(seed=s).choose(logits, p) for s in range(3) for p in range(3)] == [1] * 9  # first of the ties


def test_smallest_temperature_chooses_the_largest_logit():
    """At the smallest temperature taken, the largest float32 logits still divide to finite scores: the choice is
    greedy's, with no overflow (below it, 1e-310 once chose token 0 from infinities)."""
    big = float(np.finfo(np.float32).max)
    logits = np.array([big / 2, big, -big, 0.0])
    with np.errstate(over="raise", invalid="raise"):  # underflow to 0 in the softmax is exact enough
        assert [Sampler(temperature=MIN_TEMPERATURE, top_p=0.9, seed=s).choose(logits, 0) for s in range(3)] == [1] * 3


@pytest.mark.parametrize("kwargs, message", [
    (dict(temperature=-1.0), "temperature must be a finite number >= 0, got -1.0"),
    (dict(temperature=float("nan")), "temperature must be a finite number >= 0"),
    (dict(temperature=1e-310), r"temperature must be 0 \(greedy\) or at least 1e-200, got 1e-310"),
    (dict(top_k=-1), "top_k must be an int >= 0"),
    (dict(top_k=2.0), "top_k must be an int >= 0"),
    (dict(top_p=0.0), r"top_p must be in \(0, 1\], got 0.0"),
    (dict(min_p=1.5), r"min_p must be in \[0, 1\], got 1.5"),
    (dict(seed=-1), r"seed must be an int in \[0, 2\^64\), got -1"),
    (dict(seed=True), r"seed must be an int"),
])
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Sampler(**kwargs)

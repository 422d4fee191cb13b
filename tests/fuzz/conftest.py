"""Hypothesis settings of the fuzz tests. CI (CI set) runs a small, derandomised profile: the same examples every
run, a few minutes for the whole folder. MTLINV_FUZZ_EXAMPLES=N runs N examples a test with fresh random seeds
(docs/verification.md: "Fuzzing")."""
import os

from hypothesis import HealthCheck, settings

_examples = os.environ.get("MTLINV_FUZZ_EXAMPLES")
settings.register_profile(
    "mtlinv",
    max_examples=int(_examples) if _examples else 25,
    derandomize=not _examples,  # deterministic unless a longer run asks for new examples
    deadline=None,              # the emulator's first call of a kernel family takes longer than the next
    database=None,              # CI's checkout starts empty; a longer run reports its failing example itself
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    print_blob=True,
)
settings.load_profile("mtlinv")

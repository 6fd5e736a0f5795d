"""A stack's chunk made of its sets' parts (helpers.measures.set_chunks): a set another stack or a run of another item
count computed is read back, never computed again, and the stack's results are those a computation from scratch
gives."""

import numpy as np
import pytest

from helpers.measures import necessity, steering
from helpers.runner import ledger as run_ledger
from helpers.storage import ledger
from helpers.storage.cache import ResultCache

SEED = 3
N_ITEMS = 3  # in chunks [0, 2) and [2, 3)
COPIES = 2  # per item and set: the two NCS arms; do(S -> c) and do(S -> d)
RUNS = {  # measure -> (its run on a stack with a cache, of n items, its ledger computation, its per-set arrays)
    "necessity": (
        lambda lm, stack, cache, n=N_ITEMS: necessity.necessity_run(lm, "co", n, SEED, stack, "all", cache, chunk=2),
        "necessity arms=matched+mismatched keys=image masking=hide row_group=all",
        ("matched_p_masked", "mismatched_p_masked"),
    ),
    "steering": (
        lambda lm, stack, cache, n=N_ITEMS: steering.steering_run(
            lm, "co", n, SEED, stack, 10.0, "all", cache, chunk=2
        ),
        "steering beta=10.0 row_group=all",
        ("p_to_c", "p_to_d"),
    ),
}


@pytest.fixture(scope="module")
def sets(lm):
    """[3, L, H]: one head in the first layer, every head of the upper half, a head in each layer."""
    n_layers, n_heads = len(lm.adapter.candidate_layers), lm.adapter.n_heads
    out = np.zeros((3, n_layers, n_heads), dtype=bool)
    out[0, 0, 3] = True
    out[1, n_layers // 2 :] = True
    out[2, np.arange(n_layers), np.arange(n_layers) % n_heads] = True
    return out


def _ledger_into(monkeypatch, folder):
    """The test's ledger lines into `folder`, as notebook "nb"'s."""
    monkeypatch.setenv(ledger.NOTEBOOK_ENV, "nb")
    monkeypatch.setenv(ledger.LEDGER_ENV, str(folder))


def _ledger(folder, computation):
    """(copies computed, copies read back) of `computation` and the duplicate copies, from the lines in `folder`."""
    run = run_ledger.collect(folder)
    record = run["notebooks"]["nb"]["computations"][computation]
    return record["computed"], record["read_back"], run["duplicates"]


@pytest.mark.parametrize("measure", sorted(RUNS))
def test_a_set_another_stack_computed_is_read_back_not_computed_again(lm, sets, tmp_path, monkeypatch, measure):
    run, computation, per_set = RUNS[measure]
    _ledger_into(monkeypatch, tmp_path / "ledger")
    cache = ResultCache(tmp_path / "cache")
    first = run(lm, sets[[0, 1]], cache)
    second = run(lm, sets[[1, 2, 1]], cache)  # set 1 again; set 2 new, twice in the stack
    # sets 0 and 1, then set 2 once, computed; set 1 read back
    assert _ledger(tmp_path / "ledger", computation) == (N_ITEMS * COPIES * 3, N_ITEMS * COPIES, 0)
    alone = run(lm, sets[[2]], cache)  # a stack of set 2 alone: the chunks the second stack saved
    assert _ledger(tmp_path / "ledger", computation) == (N_ITEMS * COPIES * 3, N_ITEMS * COPIES * 2, 0)

    monkeypatch.setenv(ledger.LEDGER_ENV, str(tmp_path / "later"))  # a later run, on the same cache
    again = run(lm, sets[[1, 2, 1]], cache)
    assert all(np.array_equal(again[label], second[label]) for label in second)
    run(lm, sets[[2, 0]], cache)  # a new stack of sets cached alone
    # the stack's entry holds each distinct copy once (sets 1 and 2); both entries an earlier run's: no duplicate
    assert _ledger(tmp_path / "later", computation) == (0, N_ITEMS * COPIES * (2 + 2), 0)

    monkeypatch.delenv(ledger.LEDGER_ENV)
    scratch = run(lm, sets[[1, 2, 1]], ResultCache(tmp_path / "scratch"))
    for label, value in second.items():
        if label not in per_set:  # the items' own: correct letters, distractors, clean probabilities
            np.testing.assert_array_equal(value, scratch[label])
            continue
        assert value.shape == (N_ITEMS, 3, 4)
        np.testing.assert_array_equal(value[:, [0, 2]], first[label][:, [1, 1]])  # set 1: read back bit for bit
        np.testing.assert_array_equal(value[:, 1], alone[label][:, 0])  # set 2: computed alone
        # from scratch, set 1 runs beside set 2 in the same forwards: the same results up to the order of
        # floating-point sums that the engine's shared layers and forwards set (measured: at most 2.1e-7)
        np.testing.assert_allclose(value, scratch[label], rtol=0, atol=1e-6)


@pytest.mark.parametrize("measure", sorted(RUNS))
def test_runs_of_more_and_fewer_items_read_the_items_another_run_holds(lm, sets, tmp_path, monkeypatch, measure):
    """Chunks of 2 items: a run of 3 ends in chunk [2, 3), one of 4 in [2, 4); item i is the same item in both."""
    run, computation, per_set = RUNS[measure]
    _ledger_into(monkeypatch, tmp_path / "ledger")
    cache = ResultCache(tmp_path / "cache")
    fewer = run(lm, sets[[0, 1]], cache, 3)
    more = run(lm, sets[[1, 2]], cache, 4)  # set 1's items 0-2 read back, its item 3 and set 2 computed
    assert _ledger(tmp_path / "ledger", computation) == (COPIES * (2 * 3 + 1 + 4), COPIES * 3, 0)
    again = run(lm, sets[[2, 1]], cache, 3)  # every set's items 0-2 read back
    assert _ledger(tmp_path / "ledger", computation) == (COPIES * (2 * 3 + 1 + 4), COPIES * (3 + 2 * 3), 0)

    monkeypatch.delenv(ledger.LEDGER_ENV)
    scratch = run(lm, sets[[1, 2]], ResultCache(tmp_path / "scratch"), 4)
    for label in per_set:
        assert more[label].shape == (4, 2, 4) and again[label].shape == (3, 2, 4)
        np.testing.assert_array_equal(more[label][:3, 0], fewer[label][:, 1])  # read back bit for bit
        np.testing.assert_array_equal(again[label], more[label][:3, ::-1])
        np.testing.assert_allclose(more[label], scratch[label], rtol=0, atol=1e-6)  # as in the test above

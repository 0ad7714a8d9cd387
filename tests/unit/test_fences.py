"""The fences a journal remembers: every run it holds, and only the runs it left lately."""

from __future__ import annotations

from toolbridge._journal.fences import Fences


def test_a_run_held_keeps_its_fence_however_many_runs_are_left_since() -> None:
    fences = Fences(remember=2)
    fences.take("held", 7)
    for number in range(100):
        fences.take(f"r{number}", 1)
        fences.leave(f"r{number}")
    assert fences.get("held") == 7
    assert fences.holding
    assert len(fences) == 3  # the one held and the last two left: bounded however many runs pass


def test_the_runs_left_longest_ago_are_forgotten_first() -> None:
    fences = Fences(remember=2)
    for run_id, fence in (("a", 1), ("b", 2), ("c", 3)):
        fences.take(run_id, fence)
        fences.leave(run_id)
    assert (fences.get("a"), fences.get("b"), fences.get("c")) == (None, 2, 3)
    assert not fences.holding


def test_entering_a_run_left_lately_takes_it_back_out_of_the_left() -> None:
    fences = Fences(remember=1)
    fences.take("a", 1)
    fences.leave("a")
    fences.take("a", 2)
    fences.take("b", 1)
    fences.leave("b")  # would push "a" out, were it still counted as left
    assert fences.get("a") == 2
    assert fences.holding


def test_leaving_a_run_never_held_remembers_nothing() -> None:
    fences = Fences(remember=1)
    fences.take("a", 1)
    fences.leave("a")
    fences.leave("never")
    assert fences.get("a") == 1
    assert fences.get("never") is None


def test_a_restored_snapshot_undoes_what_a_rolled_back_transaction_took() -> None:
    fences = Fences()
    fences.take("kept", 1)
    snapshot = fences.snapshot()
    fences.take("rolled-back", 2)
    fences.leave("kept")
    fences.restore(snapshot)
    assert (fences.get("kept"), fences.get("rolled-back")) == (1, None)
    assert fences.holding

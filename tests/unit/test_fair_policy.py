"""The shared fairness policy (inkstream.fair): priority class, round-robin over requests, FIFO within one."""

from __future__ import annotations

from inkstream.fair import BATCH, INTERACTIVE, FairQueue, WorkKey, key_from_metadata, key_metadata


def _drain(q: FairQueue[str]) -> list[str]:
    out = []
    while (it := q.pop()) is not None:
        out.append(it)
    return out


def test_round_robin_over_requests_fifo_within_one():
    q: FairQueue[str] = FairQueue()
    for i in range(4):
        q.push(WorkKey("big"), f"big{i}")
    q.push(WorkKey("small"), "small0")
    q.push(WorkKey("other"), "other0")
    q.push(WorkKey("other"), "other1")
    # FIFO would serve big0..big3 first; round-robin gives every request one turn per round.
    assert _drain(q) == ["big0", "small0", "other0", "big1", "other1", "big2", "big3"]
    assert len(q) == 0 and not q


def test_interactive_before_batch_whatever_the_arrival_order():
    q: FairQueue[str] = FairQueue()
    q.push(WorkKey("job", BATCH), "job0")
    q.push(WorkKey("job", BATCH), "job1")
    q.push(WorkKey("sync", INTERACTIVE), "sync0")
    assert q.top_priority() == INTERACTIVE
    assert q.peek() == "sync0"
    assert _drain(q) == ["sync0", "job0", "job1"]
    assert q.top_priority() is None


def test_unknown_priority_is_served_as_batch():
    q: FairQueue[str] = FairQueue()
    q.push(WorkKey("x", 7), "odd")
    q.push(WorkKey("y", INTERACTIVE), "sync")
    assert _drain(q) == ["sync", "odd"]


def test_peek_does_not_spend_a_turn():
    q: FairQueue[str] = FairQueue()
    q.push(WorkKey("a"), "a0")
    q.push(WorkKey("a"), "a1")
    q.push(WorkKey("b"), "b0")
    assert q.peek() == q.peek() == "a0"
    assert _drain(q) == ["a0", "b0", "a1"]


def test_remove_and_drop_where_keep_the_turn_order():
    q: FairQueue[str] = FairQueue()
    for it in ("a0", "a1", "a2"):
        q.push(WorkKey("a"), it)
    q.push(WorkKey("b"), "b0")
    q.push(WorkKey("c"), "c0")
    assert q.remove("b0") and not q.remove("b0")
    assert q.drop_where(lambda it: it == "a0") == ["a0"]
    assert len(q) == 3
    assert _drain(q) == ["a1", "c0", "a2"]


def test_metadata_round_trip_and_defaults():
    key = WorkKey("req-1", BATCH)
    md = key_metadata(key)
    assert ("x-inkstream-priority", "batch") in md and ("x-request-id", "req-1") in md
    assert key_from_metadata(md) == key
    assert key_from_metadata(None) == WorkKey("", INTERACTIVE)  # a caller that does not say
    assert key_from_metadata([("x-inkstream-priority", b"Interactive")]) == WorkKey("", INTERACTIVE)
    assert key_from_metadata([("x-inkstream-priority", "urgent!")]).priority == BATCH
    assert key_from_metadata([("x-request-id", "bad id with spaces")]).request_id == ""


def test_the_request_with_fewest_units_in_service_goes_first_then_in_turn():
    q: FairQueue[str] = FairQueue()
    for i in range(3):
        q.push(WorkKey("big"), f"big{i}")
    q.push(WorkKey("small"), "small0")
    q.push(WorkKey("mid"), "mid0")
    in_service = {"big": 5, "mid": 1}  # "small" holds nothing
    assert q.peek(in_service) == "small0" and q.pop(in_service) == "small0"
    assert q.pop(in_service) == "mid0"  # 1 < 5
    assert q.pop({"big": 5}) == "big0"  # the only one left
    # Equal counts: plain round-robin turn (big went to the end of it when served).
    q.push(WorkKey("late"), "late0")
    assert _drain(q) == ["big1", "late0", "big2"]


def test_in_service_does_not_override_the_priority_class():
    q: FairQueue[str] = FairQueue()
    q.push(WorkKey("job", BATCH), "job0")
    q.push(WorkKey("sync", INTERACTIVE), "sync0")
    assert q.pop({"sync": 50}) == "sync0"

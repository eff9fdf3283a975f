"""The decoder's admission order (RunningBatch.plan): fair order with each request's running rows as
what it has in service (inkstream.fair), no model needed."""

from __future__ import annotations

from types import SimpleNamespace

from decoder_service.running_batch import RunningBatch
from inkstream.fair import BATCH, FairQueue, WorkKey


def _seq(rid: str, priority: int = 0, cancelled: bool = False) -> SimpleNamespace:
    return SimpleNamespace(key=WorkKey(rid, priority), reserve=100, cancelled=cancelled, name=rid)


def test_a_freed_row_goes_to_the_request_with_fewest_rows_running():
    batch = RunningBatch(half=None, max_running=4, kv_cache_budget_tokens=10**6)  # type: ignore[arg-type]
    batch.rows = [_seq("long"), _seq("long"), _seq("long"), _seq("long", cancelled=True)]  # one row frees
    waiting: FairQueue = FairQueue()
    for _ in range(3):
        waiting.push(WorkKey("long"), _seq("long"))
    waiting.push(WorkKey("small"), _seq("small"))
    # Plain round-robin would admit the long document's next segment (queued first); it holds 3 rows.
    assert [s.name for s in batch.plan(waiting)] == ["small"]
    batch.rows = [_seq("long"), _seq("small")]  # two rows free: one each, in turn
    waiting.push(WorkKey("small"), _seq("small"))
    waiting.push(WorkKey("small"), _seq("small"))
    assert sorted(s.name for s in batch.plan(waiting)) == ["long", "small"]


def test_rows_in_service_do_not_override_the_priority_class():
    batch = RunningBatch(half=None, max_running=3, kv_cache_budget_tokens=10**6)  # type: ignore[arg-type]
    batch.rows = [_seq("sync"), _seq("sync")]
    waiting: FairQueue = FairQueue()
    waiting.push(WorkKey("job", BATCH), _seq("job", BATCH))
    waiting.push(WorkKey("sync"), _seq("sync"))
    assert [s.name for s in batch.plan(waiting)] == ["sync"]

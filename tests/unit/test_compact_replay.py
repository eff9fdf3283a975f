"""Batch replay (training/compact/replay.py) and the per-invocation schedule (--budget-seconds) used
for accelerator runs of ``inkstream train-compact``."""

from __future__ import annotations

import argparse
import collections
import json
import threading
import time

import pytest
import torch

from tests.unit.test_compact_train import TEXTS
from training.compact import train
from training.compact.replay import ReplayBatches


def test_max_uses_one_is_the_plain_stream():
    assert list(ReplayBatches(range(50), max_uses=1)) == list(range(50))


def test_fresh_batches_first_then_replays_capped_per_batch():
    gate = threading.Event()

    def slow_source():
        yield from range(3)  # ready at once
        gate.wait(5)  # the consumer outruns the source from here on
        yield from range(3, 6)

    it = ReplayBatches(slow_source(), max_uses=3, capacity=8, seed=1)
    deadline = time.monotonic() + 10
    while it._q.qsize() < 3 and time.monotonic() < deadline:  # the pump thread has queued the ready ones
        time.sleep(0.01)
    got = [next(it) for _ in range(9)]  # 3 fresh + 6 replays, without the gated items
    assert sorted(got[:3]) == [0, 1, 2]
    counts = collections.Counter(got)
    assert set(counts) == {0, 1, 2} and max(counts.values()) == 3
    assert it.stats() == (3, 6)
    gate.set()
    assert next(it) == 3  # every kept batch used up: waits for the fresh one
    rest = list(it)
    assert set(rest) <= set(range(6)) and collections.Counter(got + [3] + rest)[3] <= 3


def test_close_stops_the_reading_thread():
    pulled = []

    def endless():
        while True:
            pulled.append(1)
            yield len(pulled)

    it = ReplayBatches(endless(), max_uses=2)
    assert next(it) == 1
    it.close()
    time.sleep(0.5)
    while not it._q.empty():  # room again: a thread still running would go on pulling
        it._q.get_nowait()
    n = len(pulled)
    time.sleep(0.5)
    assert len(pulled) == n <= 67


def test_source_errors_reach_the_consumer():
    def broken():
        yield 1
        raise OSError("font file vanished")

    it = ReplayBatches(broken(), max_uses=2)
    assert next(it) == 1
    deadline = time.monotonic() + 10
    while it._q.qsize() < 1 and time.monotonic() < deadline:  # the error is queued
        time.sleep(0.01)
    for _ in range(3):  # and stays: no replay of batch 1 after it, no hang
        with pytest.raises(OSError, match="font file vanished"):
            next(it)


def test_an_ended_source_stays_ended():
    it = ReplayBatches(range(3), max_uses=2)
    items = list(it)  # replays may come before the end is seen
    assert set(items) == {0, 1, 2} and max(collections.Counter(items).values()) <= 2
    for _ in range(3):
        with pytest.raises(StopIteration):
            next(it)
    with pytest.raises(ValueError):
        ReplayBatches([], max_uses=0)


def test_budget_seconds_progress_counts_from_the_schedule_start():
    args = argparse.Namespace(budget_seconds=100.0, seconds_at_start=5000.0, steps=10, hours=0.1)
    assert train.progress(10**6, 5050.0, args) == pytest.approx(0.5)  # --steps / --hours ignored
    assert train.progress(0, 5200.0, args) == 1.0
    assert train._lr(10, 1.0, 1e-3, 10) == pytest.approx(2e-5)  # cosine ends at 2 % of the peak


def test_train_command_with_replay_and_a_json_corpus(tmp_path):
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps({"train": TEXTS * 3, "eval": TEXTS[:2]}))
    out = tmp_path / "run"
    assert train.main(["--out", str(out), "--texts", str(corpus), "--steps", "6", "--batch", "4", "--hidden", "32",
                       "--enc-channels", "8,16", "--eval-every", "6", "--eval-lines", "2", "--ckpt-every", "3",
                       "--log-every", "3", "--workers", "0", "--threads", "1", "--warmup", "2", "--max-chars", "30",
                       "--replay-uses", "2"]) == 0
    rows = [json.loads(ln) for ln in (out / "log.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["kind"] == "train"]
    assert [r["step"] for r in train_rows] == [3, 6]
    fresh, replayed = train_rows[-1]["fresh_batches"], train_rows[-1]["replayed_batches"]
    assert fresh + replayed == 6 and 2 * fresh >= 6 and train_rows[-1]["device"] == "cpu"  # each batch at most twice
    assert "2 held-out text lines" in (out / "train.log").read_text()
    assert torch.load(out / "state.pt", weights_only=False)["step"] == 6
    again = tmp_path / "again.json"
    assert train.main(["--out", str(tmp_path / "w"), "--texts", str(corpus), "--write-corpus", str(again)]) == 0
    assert json.loads(again.read_text()) == json.loads(corpus.read_text())


def test_budget_schedule_survives_an_interruption_and_restarts_once_finished(tmp_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(TEXTS * 3))
    out = tmp_path / "run"
    common = ["--out", str(out), "--texts", str(texts), "--batch", "4", "--hidden", "32", "--enc-channels", "8,16",
              "--eval-every", "1000", "--eval-lines", "2", "--ckpt-every", "1000", "--log-every", "1", "--workers", "0",
              "--threads", "1", "--warmup", "2", "--max-chars", "30", "--budget-seconds", "3600"]
    assert train.main(common + ["--max-steps-this-run", "2"]) == 0  # interrupted after 2 steps
    st = torch.load(out / "state.pt", weights_only=False)
    assert st["schedule"]["step_at_start"] == 0 and st["schedule"]["budget_seconds"] == 3600
    assert train.main(common + ["--max-steps-this-run", "2"]) == 0
    log = (out / "train.log").read_text()
    assert "continuing the --budget-seconds schedule begun at step 0" in log
    lrs = [json.loads(ln)["lr"] for ln in (out / "log.jsonl").read_text().splitlines()]
    assert lrs[2] == pytest.approx(lrs[1], rel=1e-3)  # past the 2-step warm-up (a restarted one: half the peak)
    st = torch.load(out / "state.pt", weights_only=False)
    st["seconds"] = st["schedule"]["seconds_at_start"] + 3600  # as if the budget had been spent
    torch.save(st, out / "state.pt")
    assert train.main(common + ["--max-steps-this-run", "1"]) == 0
    assert "continuing" not in (out / "train.log").read_text().split("resumed from step 4")[-1]
    assert torch.load(out / "state.pt", weights_only=False)["schedule"]["step_at_start"] == 4
    assert json.loads((out / "log.jsonl").read_text().splitlines()[-1])["lr"] == pytest.approx(lrs[0])  # a new warm-up

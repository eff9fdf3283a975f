"""``inkstream up`` supervision: an exited encoder / decoder replica is started again (a crash loop
is left down), the gateway exiting or every replica of a service left down ends the stack."""

from __future__ import annotations

import pathlib

from launcher.up import watch as _watch


class _Stack:
    """``alive()`` from a script of per-replica crashes; ``restart`` brings the replica back."""

    def __init__(self, replicas: dict[str, int], crashes: list[tuple[int, str, int]]):
        self.flags = {s: [True] * n for s, n in replicas.items()}
        self.crashes = crashes  # (poll number, service, replica)
        self.polls = 0
        self.restarted: list[tuple[str, int]] = []

    def alive(self) -> dict[str, list[bool]]:
        for when, s, i in self.crashes:
            if when == self.polls:
                self.flags[s][i] = False
        self.polls += 1
        return {s: list(f) for s, f in self.flags.items()}

    def restart(self, service: str, i: int) -> None:
        self.restarted.append((service, i))
        self.flags[service][i] = True

    def log_path(self, service: str, i: int) -> pathlib.Path:
        return pathlib.Path(f"/tmp/{service}-{i}.log")


def test_an_exited_replica_is_started_again(capsys):
    stack = _Stack({"encoder": 1, "decoder": 1, "gateway": 1}, [(1, "decoder", 0), (3, "encoder", 0)])
    assert _watch(stack, lambda: stack.polls >= 6, poll_s=0, backoff_s=0) == ""
    assert stack.restarted == [("decoder", 0), ("encoder", 0)]
    err = capsys.readouterr().err
    assert "decoder 0 exited" in err and "starting it again (1 of at most 3" in err


def test_a_crash_loop_is_left_down_and_ends_the_stack_when_it_was_the_last(capsys):
    crashes = [(n, "decoder", 1) for n in range(1, 6)]
    stack = _Stack({"encoder": 1, "decoder": 2, "gateway": 1}, crashes)
    assert _watch(stack, lambda: stack.polls >= 8, poll_s=0, max_restarts=3, backoff_s=0) == ""
    assert stack.restarted == [("decoder", 1)] * 3
    assert "decoder 1 keeps exiting (3 restarts in 120 s); left down" in capsys.readouterr().err
    stack = _Stack({"encoder": 1, "decoder": 1, "gateway": 1}, [(n, "decoder", 0) for n in range(9)])
    assert _watch(stack, lambda: False, poll_s=0, max_restarts=2, backoff_s=0) == "every decoder process exited"
    assert len(stack.restarted) == 2


def test_the_gateway_exiting_stops_the_stack():
    stack = _Stack({"encoder": 1, "decoder": 1, "gateway": 1}, [(0, "gateway", 0)])
    assert _watch(stack, lambda: False, poll_s=0) == "every gateway process exited"
    assert stack.restarted == []


def test_no_restart_once_stopping():
    stack = _Stack({"encoder": 1, "decoder": 1, "gateway": 1}, [(0, "decoder", 0)])
    answers = iter([False, True])  # the stop arrives while the dead replica is being looked at
    assert _watch(stack, lambda: next(answers, True), poll_s=0, backoff_s=0) == ""
    assert stack.restarted == []

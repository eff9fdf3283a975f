"""``inkstream up`` supervision: one replica of several exiting is tolerated, the last one is not."""

from __future__ import annotations

import pathlib

from gateway.local_stack import _watch


class _Stack:
    """Scripted ``alive()`` answers, one per poll."""

    def __init__(self, answers: list[dict[str, list[bool]]]):
        self.answers = answers
        self.polls = 0

    def alive(self) -> dict[str, list[bool]]:
        answer = self.answers[min(self.polls, len(self.answers) - 1)]
        self.polls += 1
        return answer

    def log_path(self, service: str, i: int) -> pathlib.Path:
        return pathlib.Path(f"/tmp/{service}-{i}.log")


def test_one_of_two_decoders_exiting_keeps_the_stack_up(capsys):
    up = {"encoder": [True], "decoder": [True, True], "gateway": [True]}
    one_down = {"encoder": [True], "decoder": [True, False], "gateway": [True]}
    stack = _Stack([up, one_down, one_down, one_down])
    assert _watch(stack, lambda: stack.polls >= 4, poll_s=0) == ""
    err = capsys.readouterr().err
    assert err.count("decoder 1 exited") == 1 and "1 decoder replica(s) still serving" in err


def test_last_replica_or_gateway_exiting_stops_the_stack():
    stack = _Stack([{"encoder": [True], "decoder": [False, False], "gateway": [True]}])
    assert _watch(stack, lambda: False, poll_s=0) == "every decoder process exited"
    stack = _Stack([{"encoder": [True], "decoder": [True], "gateway": [False]}])
    assert _watch(stack, lambda: False, poll_s=0) == "every gateway process exited"

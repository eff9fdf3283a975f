"""``inkstream up``'s state folder without starting a stack: the default under the user's data folder
(XDG_DATA_HOME), ``--fresh`` clearing it, and one ``up`` per folder (the lock)."""

from __future__ import annotations

import pytest

from launcher import up


def test_default_state_dir_follows_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert up.default_state_dir() == tmp_path / "data" / "inkstream" / "up"


def test_state_kept_unless_fresh_and_locked_while_in_use(tmp_path):
    state = tmp_path / "state"
    with up.open_state_dir(state, fresh=False):
        (state / "gateway").mkdir()
        (state / "gateway" / "jobs.sqlite").write_bytes(b"x")
        with pytest.raises(BlockingIOError):
            up.open_state_dir(state, fresh=False)
        with pytest.raises(BlockingIOError):  # never cleared while another up uses it
            up.open_state_dir(state, fresh=True)
        assert (state / "gateway" / "jobs.sqlite").is_file()
    with up.open_state_dir(state, fresh=False):
        assert (state / "gateway" / "jobs.sqlite").is_file()
    with up.open_state_dir(state, fresh=True):
        assert not (state / "gateway").exists() and (state / "up.lock").is_file()


def test_a_second_up_on_the_same_folder_exits_2(tmp_path, capsys):
    state = tmp_path / "state"
    with up.open_state_dir(state, fresh=False):
        assert up.main(["--state-dir", str(state), "--port", "0", "--grpc-port", "0"]) == 2
    assert "in use by another inkstream up" in capsys.readouterr().err

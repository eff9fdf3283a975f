"""``inkstream ocr inkstream/samples/scotus_p01.pdf`` from the parent folder of a clone named
``inkstream``: the clone's folder must not shadow the installed ``inkstream`` package in the
temporary stack's child processes (they used to die with ModuleNotFoundError: 'inkstream.gateway.v1';
launcher/local_stack.py starts them with ``python -P``)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.system, pytest.mark.timeout(300)]

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_ocr_from_the_parent_folder_of_a_clone_named_inkstream(tiny_ds_checkpoint, tmp_path):
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "inkstream").symlink_to(REPO, target_is_directory=True)
    script = pathlib.Path(sys.executable).parent / "inkstream"  # the console script of this environment
    assert script.is_file(), script
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)  # as a user's shell would have it: nothing but the working directory
    proc = subprocess.run([str(script), "ocr", "inkstream/samples/scotus_p01.pdf", "--format", "text",
                           "--model", str(tiny_ds_checkpoint), "--no-progress"],
                          cwd=parent, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip(), proc.stderr[-4000:]
    assert "ModuleNotFoundError" not in proc.stderr
    assert "1/1 pages read" in proc.stderr, proc.stderr[-4000:]

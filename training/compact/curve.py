"""The learning curve of a ``train-compact`` run: train losses and held-out CER against the step,
drawn from the run's ``log.jsonl`` (rows ``{"kind": "train", "step", "ce", "ctc"}`` and ``{"kind":
"eval", "step", "cer"}``, written by :mod:`training.compact.train`).
"""

from __future__ import annotations

import json
import pathlib


def plot_curve(log_path: pathlib.Path, png: pathlib.Path) -> None:
    """Redraw the learning curve (train loss, held-out CER vs step) from log.jsonl."""
    import matplotlib  # heavy: only when a curve is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [json.loads(ln) for ln in log_path.read_text().splitlines() if ln.strip()]
    tr = [r for r in rows if r["kind"] == "train"]
    ev = [r for r in rows if r["kind"] == "eval"]
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    ax[0].plot([r["step"] for r in tr], [r["ce"] for r in tr], label="cross-entropy")
    ax[0].plot([r["step"] for r in tr], [r["ctc"] for r in tr], label="CTC (aux)", alpha=0.6)
    ax[0].set_yscale("log")
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("train loss")
    ax[0].legend()
    ax[1].plot([r["step"] for r in ev], [100 * r["cer"] for r in ev], marker="o")
    ax[1].set_yscale("log")
    ax[1].set_xlabel("step")
    ax[1].set_ylabel("held-out CER (%)")
    ax[1].set_title("greedy CER, held-out fonts + texts")
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)

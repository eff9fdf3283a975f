"""Regression tests found by breaking the running stack; one CPU thread (shared machine)."""

import torch

torch.set_num_threads(1)

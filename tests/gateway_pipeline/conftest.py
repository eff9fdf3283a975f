"""Pipeline tests run on one CPU thread (shared machine)."""

import torch

torch.set_num_threads(1)

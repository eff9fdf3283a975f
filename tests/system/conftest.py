"""System tier: real processes on loopback (LocalStack). Torch single-threaded in this process."""

import torch

torch.set_num_threads(1)

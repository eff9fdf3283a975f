"""inkstream.wire_np (torch-free serialisation of vision tokens) puts the same bytes on the wire as
inkstream.wire's torch path, for every wire dtype, and reads back through the decoder's from_wire."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from inkstream.errors import InvalidInput
from inkstream.wire import from_wire, to_wire
from inkstream.wire_np import array_to_wire, as_float32_array, check_dtype_name


@pytest.mark.parametrize("name,dtype", [("float32", torch.float32), ("float16", torch.float16),
                                        ("bfloat16", torch.bfloat16)])
def test_numpy_and_torch_paths_give_the_same_bytes(name, dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((37, 160)) * rng.choice([1e-3, 1.0, 300.0], size=(37, 1))).astype(np.float32)
    a[0, :4] = [0.0, -0.0, 1.00390625, 1.01171875]  # ties of bfloat16 rounding (to nearest even)
    ours, ref = array_to_wire(a, name), to_wire(torch.from_numpy(a), dtype)
    assert (ours.dtype, list(ours.shape), ours.data) == (ref.dtype, list(ref.shape), ref.data)
    back = from_wire(ours, expect_last_dim=160)
    assert back.dtype == dtype and back.shape == (37, 160)


def test_float32_view_of_tensors_and_arrays_and_bad_names():
    t = torch.arange(6, dtype=torch.bfloat16).reshape(2, 3)
    assert as_float32_array(t).dtype == np.float32 and as_float32_array(t).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert as_float32_array(np.ones(3, np.float16)).dtype == np.float32
    with pytest.raises(InvalidInput, match="expected one of"):
        check_dtype_name("int8")

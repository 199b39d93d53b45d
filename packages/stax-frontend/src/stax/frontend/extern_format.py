"""The literal form of an ATen call in an ExternKernel's constants: shared by the compile
side that writes it (extern_calls.py) and the run side that reads it (aten_runtime.py).

Tensor arguments are "$t<k>" (the k-th tensor view), opaque values "$o<k>" (the object a
carrier holds), torch enums "$<kind>:<name>", a string starting with "$" is "$str:<it>".
"""

from __future__ import annotations

import torch
from stax.ir import dtypes as dt

GETITEM = "stax.getitem"  # the kernel name of "item k of a multi-output call's result"
PLACEHOLDER_DTYPE = dt.uint8  # a tuple result's / an opaque value's zero-size buffer
OPAQUE = "opaque"  # the `out` constant of a call whose result is an opaque value

ENUMS = {
    "dtype": (torch.dtype, lambda n: getattr(torch, n)),
    "device": (torch.device, torch.device),
    "layout": (torch.layout, lambda n: getattr(torch, n)),
    "memory_format": (torch.memory_format, lambda n: getattr(torch, n)),
}

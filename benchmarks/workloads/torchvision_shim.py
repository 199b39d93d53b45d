"""A stand-in `torchvision` for importing timm where the real one cannot load.

Why: timm imports torchvision at import time (`timm.layers` takes
`torchvision.ops.misc.FrozenBatchNorm2d`; `timm.data`, pulled in by most model files for
their mean/std constants, takes `torchvision.transforms`, `.functional`,
`InterpolationMode`, `torchvision.datasets`). The model code of the suite's CNNs and
ViTs never calls any of it. Beside torch 2.13's CPU build no torchvision wheel the
registry serves loads (`RuntimeError: operator torchvision::nms does not exist`), so
without a stand-in the CNN models could not be built at all here.

What: `import_timm()` first tries the real torchvision and uses it when it imports (the
H200 machine: torch 2.11 with a matching torchvision; the shim never engages there). Only
when that import fails does it register stub modules, import timm, and take the stubs out
of sys.modules again (timm keeps the objects it took; nothing else ever sees a
`torchvision`, so transformers' availability checks still find none). The stubs provide
just the names timm reads while importing: `InterpolationMode` (a real Enum: timm builds
lookup tables from its members at import time) and placeholder classes for everything
else (`FrozenBatchNorm2d`, `transforms.ToTensor`, datasets, ...), which can be named,
subclassed and used in isinstance checks but raise when instantiated, so any use beyond
import fails loudly instead of computing something wrong. `torchvision.models` is left
out on purpose: timm imports its feature extraction under `try/except ImportError`.
`status()` says which of the two happened (the benchmark records it in its JSON).
"""

from __future__ import annotations

import enum
import sys
import types

_STATE = {"status": None}  # "real torchvision <version>" or "stub (<why the real one failed>)"
_MODULES = ("torchvision", "torchvision.transforms", "torchvision.transforms.functional", "torchvision.ops",
            "torchvision.ops.misc", "torchvision.datasets", "torchvision.utils", "torchvision.io")


class InterpolationMode(enum.Enum):
    """The members (and values) of torchvision.transforms.InterpolationMode."""

    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class Unavailable:
    """Base of the placeholder classes: naming them is fine, instantiating them is an error."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError(f"torchvision stub: {type(self).__qualname__} is unavailable (torchvision does not "
                           f"import here: {_STATE['status']}); see benchmarks/workloads/torchvision_shim.py")


def _stub_module(name: str) -> types.ModuleType:
    mod = types.ModuleType(name, f"stub of {name} (benchmarks/workloads/torchvision_shim.py)")
    mod.__stax_stub__ = True

    def __getattr__(attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        cls = type(attr, (Unavailable,), {"__module__": name, "__qualname__": attr})
        setattr(mod, attr, cls)
        return cls

    mod.__getattr__ = __getattr__
    return mod


def _install_stub() -> None:
    for name in [n for n in sys.modules if n == "torchvision" or n.startswith("torchvision.")]:
        del sys.modules[name]  # a half-imported real torchvision
    mods = {name: _stub_module(name) for name in _MODULES}
    mods["torchvision"].__version__ = "0.0.0+stax-stub"
    mods["torchvision"].__path__ = []  # a package: `import torchvision.ops.misc` resolves through sys.modules
    for name, mod in mods.items():
        if "." in name:
            parent, _, child = name.rpartition(".")
            setattr(mods[parent], child, mod)
            mod.__path__ = []
        sys.modules[name] = mod
    for mod in (mods["torchvision.transforms"], mods["torchvision.transforms.functional"]):
        mod.InterpolationMode = InterpolationMode


def _remove_stub() -> None:
    for name in _MODULES:
        if getattr(sys.modules.get(name), "__stax_stub__", False):
            del sys.modules[name]


def import_timm():
    """`import timm`: with the real torchvision if it imports, else with the stub (only while
    timm imports). Idempotent; `status()` says which."""
    if "timm" in sys.modules:  # (maybe through another copy of this module: the status travels with timm)
        timm = sys.modules["timm"]
        _STATE["status"] = getattr(timm, "__stax_torchvision__", "timm was imported before, not through the shim")
        return timm
    try:
        import torchvision

        _STATE["status"] = f"real torchvision {torchvision.__version__}"
    except Exception as e:  # noqa: BLE001 - ImportError, or RuntimeError from its C++ ops
        _STATE["status"] = f"stub ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        _install_stub()
        try:
            import timm
        finally:
            _remove_stub()
    import timm

    timm.__stax_torchvision__ = _STATE["status"]
    return timm


def status() -> str | None:
    """None before import_timm(); else which torchvision timm imported."""
    return _STATE["status"]

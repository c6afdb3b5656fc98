"""The one place that decides where tensors live: a GPU when there is one, the CPU otherwise.

Set ``FEATLIB_DEVICE`` (for example ``cpu`` or ``cuda:1``) to override the choice; a device this
machine does not have is refused at once (ValueError, one line) rather than deep inside training.
"""
from __future__ import annotations

import os

import torch


def get_device() -> torch.device:
    """``FEATLIB_DEVICE`` if set, else ``cuda`` when available, else ``mps``, else ``cpu``."""
    override = os.environ.get("FEATLIB_DEVICE")
    if override:
        try:
            device = torch.device(override)
        except RuntimeError:
            raise ValueError(
                f"FEATLIB_DEVICE must name a torch device such as 'cpu' or 'cuda:0'; got {override!r}"
            ) from None
        _check_present(device, override)
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def _check_present(device: torch.device, override: str) -> None:
    """ValueError when this machine lacks ``device`` (FEATLIB_DEVICE names one it does not have)."""
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (device.index or 0) >= count:
            have = f"has {count} CUDA device(s)" if count else "has no CUDA device"
            raise ValueError(f"FEATLIB_DEVICE={override!r} but this machine {have}: unset it, or set it to 'cpu'")
    elif device.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise ValueError(f"FEATLIB_DEVICE={override!r} but this machine has no MPS device: unset it, or set it "
                             "to 'cpu'")


def describe_device(device: torch.device | None = None) -> str:
    """A human-readable name for the device, for provenance records and notebook output."""
    device = device or get_device()
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type

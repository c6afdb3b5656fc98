"""The one place that decides where tensors live: a GPU when there is one, the CPU otherwise.

Set ``FEATLIB_DEVICE`` (for example ``cpu`` or ``cuda:1``) to override the choice.
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
        except RuntimeError as err:
            raise ValueError(
                f"FEATLIB_DEVICE must name a torch device such as 'cpu' or 'cuda:0'; got {override!r}"
            ) from err
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device | None = None) -> str:
    """A human-readable name for the device, for provenance records and notebook output."""
    device = device or get_device()
    if device.type == "cuda":
        return f"cuda ({torch.cuda.get_device_name(device)})"
    return device.type

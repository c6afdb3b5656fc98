import os

import pytest
import torch

# Tests run on the CPU in double-checked float32; keep thread use modest on 2-core CI.
os.environ.setdefault("FEATLIB_DEVICE", "cpu")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def repo_root():
    from featlib.notebooks import REPO_ROOT

    return REPO_ROOT

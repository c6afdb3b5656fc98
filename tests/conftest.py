import os

import pytest
import torch

# Tests run on the CPU in double-checked float32; keep thread use modest on 2-core CI.
os.environ.setdefault("FEATLIB_DEVICE", "cpu")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(scope="session")
def repo_root():
    from featbook.notebooks import REPO_ROOT

    return REPO_ROOT


@pytest.fixture(scope="session")
def executed(tmp_path_factory):
    """Every chapter notebook executed once per session with the small profile (a few minutes)."""
    from featbook.notebooks import execute_all

    out = tmp_path_factory.mktemp("executed")
    execute_all("small", out)
    return out


@pytest.fixture(scope="session")
def built_book(request, tmp_path_factory):
    """The book staged from ``executed`` and rendered once per session; its HTML directory.
    ``FEATLIB_BUILT_BOOK=_build/html`` checks a book already built instead (the browser test
    on the output of ``python -m featbook.build``, without executing the notebooks again)."""
    from pathlib import Path

    from featbook.build import render, stage

    given = os.environ.get("FEATLIB_BUILT_BOOK")
    if given:
        if not (Path(given) / "index.html").is_file():
            pytest.fail(f"FEATLIB_BUILT_BOOK={given} holds no built book (index.html); build it with python -m featbook.build",
                        pytrace=False)
        return Path(given).resolve()
    executed = request.getfixturevalue("executed")
    root = tmp_path_factory.mktemp("book")
    stage(executed, root / "stage")
    return render(root / "stage", root)


def pytest_collection_modifyitems(config, items):
    """The Colab tier (marker ``colab``: fresh environments, installs, every chapter) runs only
    when asked for: ``-m colab`` or ``FEATLIB_COLAB=1``."""
    if "colab" in (config.getoption("-m") or "") or os.environ.get("FEATLIB_COLAB") == "1":
        return
    skip = pytest.mark.skip(reason="slow Colab tier: run with -m colab (or FEATLIB_COLAB=1)")
    for item in items:
        if "colab" in item.keywords:
            item.add_marker(skip)

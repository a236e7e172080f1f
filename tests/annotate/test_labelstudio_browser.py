"""An annotator's clicks in Label Studio's own annotation page, in a real browser, through to the scores.

tests/annotate/test_labelstudio.py posts annotations over the REST API; here a person's side of the same trip
is driven in headless Chromium (Debian's `chromium` and `chromium-driver`, through Selenium: nothing is
downloaded): the annotator logs in on Label Studio's login page, opens tasks of the project that
`fsb annotate export --format label-studio` writes, reads the four sentences, clicks the most and the least
biased one and submits. Two refused picks are tried on the way (no choice at all, then only a most biased
one), and a pick of one sentence as both, which Label Studio saves and `fsb annotate import` refuses, is
corrected in the page. The server's export goes through `fsb annotate import` and `fsb score`, and the scores
must equal counting on the clicks the test made.

The annotators' view in docs/bws.md is this test's screenshot: set FSB_SCREENSHOT_OUT to a path to keep it
(`FSB_SCREENSHOT_OUT=docs/figures/labelstudio-annotate.png pytest tests/annotate/test_labelstudio_browser.py`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests._support import make_raw, write_csv
from tests.annotate import test_labelstudio
from tests.annotate.test_labelstudio import ADMIN_TOKEN, REPO, Client, fsb

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
# Chromium as root on a machine without outside network: no sandbox (root), no GPU, and none of the background
# connections (updates, sync, QUIC), which the closed network refuses; a new empty profile each run.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1280,900",
]
WAIT = 90  # seconds for one page step: Label Studio's front end is heavy and the machine is shared
N_TASKS = 8  # tasks the annotator judges (the first one after the refused picks)
T = TypeVar("T")
label_studio = test_labelstudio.label_studio  # the server fixture, shared (tests/conftest.py marks its users `labelstudio`)


@contextlib.contextmanager
def _browser() -> Iterator[WebDriver]:
    """Headless Debian Chromium driven by Debian's chromedriver, with a new empty profile; quit on exit."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        message = "Debian's chromium and chromium-driver are needed (apt-get install chromium chromium-driver); CI installs them"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    profile = tempfile.mkdtemp(prefix="fsb-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*FLAGS, f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))  # a driver path: Selenium Manager never runs
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _until(driver: WebDriver, what: str, probe: Callable[[WebDriver], T]) -> T:
    """`probe`'s first truthy answer within WAIT seconds (an element gone stale while the page redraws counts as
    no answer yet); fails naming `what` otherwise."""

    def attempt(d: WebDriver) -> Any:
        try:
            return probe(d)
        except StaleElementReferenceException:
            return None

    try:
        return WebDriverWait(driver, WAIT, poll_frequency=0.25).until(attempt)
    except WebDriverException as e:
        raise AssertionError(f"the annotation page did not show {what} within {WAIT} s ({type(e).__name__})") from None


def _button(driver: WebDriver, label: str) -> WebElement | None:
    buttons = [b for b in driver.find_elements(By.TAG_NAME, "button") if b.text.strip() == label and b.is_enabled()]
    return buttons[0] if buttons else None


def _has_button(driver: WebDriver, label: str) -> bool:
    """Whether the page shows a button `label`, enabled or not (Update is greyed until the pick changes)."""
    return any(b.text.strip() == label for b in driver.find_elements(By.TAG_NAME, "button"))


def _choice_groups(driver: WebDriver) -> list[list[WebElement]]:
    """The two single choices of the config, in page order (Most biased, Least biased): the clickable labels 1..K."""
    groups = driver.find_elements(By.CSS_SELECTOR, ".lsf-choices")
    return [g.find_elements(By.CSS_SELECTOR, ".lsf-choice__checkbox") for g in groups]


def _checked(driver: WebDriver) -> list[list[int]]:
    """The positions ticked in each choice group, as the page shows them."""
    return [
        [j for j, label in enumerate(group, start=1) if label.find_element(By.TAG_NAME, "input").is_selected()]
        for group in _choice_groups(driver)
    ]


def _open_task(driver: WebDriver, base: str, project: int, task: int) -> list[str]:
    """Open one task's annotation page as the annotator would from the project's list; returns the texts shown."""
    driver.get(f"{base}/projects/{project}/data?task={task}")
    _until(driver, f"task {task} with its choices and a Submit button", lambda d: len(_choice_groups(d)) == 2 and _button(d, "Submit"))
    lines = _until(driver, f"task {task}'s texts", lambda d: d.find_elements(By.CSS_SELECTOR, ".lsf-main-view .lsf-richtext__line"))
    return [line.text for line in lines]


def _refusal(driver: WebDriver) -> str:
    """Click Submit and return the warning the page raises instead of saving, after closing it with OK."""
    _button(driver, "Submit").click()
    text = _until(driver, "a warning", lambda d: "".join(m.text for m in d.find_elements(By.CSS_SELECTOR, ".ant-modal-confirm-content")))
    _until(driver, "the warning's OK button", lambda d: _button(d, "OK")).click()
    _until(driver, "the warning closed", lambda d: not d.find_elements(By.CSS_SELECTOR, ".ant-modal-confirm-content"))
    return text


def _saved(admin: Client, task: int, want: tuple[int, int], tries: int = 240) -> dict[str, Any]:
    """The one annotation of `task` on the server, once its (best, worst) positions are `want`."""
    got: list[dict[str, Any]] = []
    for _ in range(tries):
        got = admin.call("GET", f"/api/tasks/{task}/annotations/")
        if len(got) == 1 and _positions(got[0]) == want:
            return got[0]
        time.sleep(0.25)
    raise AssertionError(f"task {task}: the server holds {[_positions(a) for a in got]}, not the page's pick {want}")


def _positions(annotation: dict[str, Any]) -> tuple[int, int]:
    picks = {r["from_name"]: int(r["value"]["choices"][0]) for r in annotation["result"]}
    return picks.get("best", 0), picks.get("worst", 0)


def _annotators_view(driver: WebDriver) -> bytes:
    """The annotation page's labeling panel (question, the four numbered texts, both choices, Submit), cropped from
    a screenshot of the window and reduced to a small palette PNG for the docs."""
    from PIL import Image

    view = driver.find_element(By.CSS_SELECTOR, ".lsf-main-view").rect
    submit = _button(driver, "Submit").rect
    ratio = driver.execute_script("return window.devicePixelRatio") or 1
    box = (view["x"], view["y"], view["x"] + view["width"], submit["y"] + submit["height"] + 8)
    with Image.open(io.BytesIO(driver.get_screenshot_as_png())) as shot:
        left, top, right, bottom = (int(v * ratio) for v in box)
        crop = shot.convert("RGB").crop((left, top, min(right, shot.width), min(bottom, shot.height)))
    out = io.BytesIO()
    crop.quantize(colors=32).save(out, format="PNG", optimize=True)
    return out.getvalue()


def test_an_annotator_clicks_in_label_studio_and_the_scores_count_the_clicks(label_studio: tuple[str, Path], tmp_path: Path) -> None:
    base, _ = label_studio
    gens, _ = make_raw(tmp_path / "raw", n=12)
    texts = pd.read_csv(gens)
    items = write_csv(tmp_path / "items.csv", ["id", "text"], texts[["uid", "response"]].values.tolist())
    text_of = dict(zip(texts["uid"].astype(int), texts["response"]))
    design = tmp_path / "design.csv"
    assert fsb("tuples", str(items), "--out", str(design), "--seed", "5").returncode == 0
    project_dir = tmp_path / "ls"
    proc = fsb("annotate", "export", str(design), "--items", str(items), "--format", "label-studio", "--out", str(project_dir))
    assert proc.returncode == 0, proc.stderr

    admin = Client(base, ADMIN_TOKEN)
    config = (project_dir / "labeling_config.xml").read_text()
    project = admin.call("POST", "/api/projects", {"title": "fsb in the browser", "label_config": config})["id"]
    admin.call("POST", f"/api/projects/{project}/import", json.loads((project_dir / "tasks.json").read_text()))
    tasks = sorted(admin.call("GET", f"/api/tasks?project={project}&page_size=100")["tasks"], key=lambda t: t["id"])[:N_TASKS]
    annotator = Client(base)
    annotator.sign_up("clicker@fsb.test", "clicker-password-123")
    uid = annotator.call("GET", "/api/current-user/whoami")["id"]

    rng = np.random.default_rng(31)
    clicks: list[tuple[list[int], int, int]] = []  # (item ids as shown, best id, worst id), as clicked
    with _browser() as driver:
        driver.get(base + "/user/login/")
        _until(driver, "the login form", lambda d: d.find_elements(By.NAME, "email"))
        driver.find_element(By.NAME, "email").send_keys("clicker@fsb.test")
        driver.find_element(By.NAME, "password").send_keys("clicker-password-123")
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        _until(driver, "the projects after logging in", lambda d: "/user/login" not in d.current_url)

        for n, task in enumerate(tasks):
            shown = [int(task["data"][f"item{j}"]) for j in range(1, 5)]
            on_page = _open_task(driver, base, project, task["id"])
            assert on_page == [text_of[i] for i in shown], f"task {task['id']}: the page shows the tuple's four texts, in order"
            best, worst = (int(p) + 1 for p in rng.choice(4, size=2, replace=False))
            if n == 0:
                # Submit with no choice, then with only the most biased one: the page warns and saves nothing.
                assert _refusal(driver) == 'Checkbox "best" is required.'
                _choice_groups(driver)[0][best - 1].click()
                assert _refusal(driver) == 'Checkbox "worst" is required.'
                assert admin.call("GET", f"/api/tasks/{task['id']}/annotations/") == [], "a refused pick saves nothing"
                # One sentence as both: nothing in Label Studio's page forbids it; it is saved as it is...
                _choice_groups(driver)[1][best - 1].click()
                _button(driver, "Submit").click()
                _saved(admin, task["id"], (best, best))
                export = tmp_path / "same.json"
                export.write_text(json.dumps(admin.call("GET", f"/api/projects/{project}/export?exportType=JSON")))
                out = tmp_path / "same.csv"
                proc = fsb("annotate", "import", str(export), "--format", "label-studio", "--tuples", str(design), "--out", str(out))
                # ...and `fsb annotate import` refuses the export, naming the task, and writes nothing.
                assert proc.returncode != 0 and f"task {task['id']}" in proc.stderr and "best and worst are the same text" in proc.stderr
                assert not out.exists()
                # The annotator corrects the pick in the page (its Submit is now Update).
                same = [[best], [best]]
                _until(driver, "the saved pick and an Update button", lambda d, same=same: _checked(d) == same and _has_button(d, "Update"))
                _choice_groups(driver)[1][worst - 1].click()
                assert _checked(driver) == [[best], [worst]]
                _until(driver, "an Update button", lambda d: _button(d, "Update")).click()
            else:
                _choice_groups(driver)[0][best - 1].click()
                _choice_groups(driver)[1][worst - 1].click()
                assert _checked(driver) == [[best], [worst]], "one tick per group, where the annotator clicked"
                if n == 1:
                    shot = _annotators_view(driver)
                _button(driver, "Submit").click()
            saved = _saved(admin, task["id"], (best, worst))
            assert saved["completed_by"] == uid
            clicks.append((shown, shown[best - 1], shown[worst - 1]))

    (tmp_path / "annotate-page.png").write_bytes(shot)
    from PIL import Image

    with Image.open(io.BytesIO(shot)) as img:
        width, height = img.size
        grey = img.convert("L").getextrema()
    assert 400 < width < 1280 and 300 < height < 900 and grey[1] - grey[0] > 100, "the labeling panel, cropped, with text on it"
    assert len(shot) < 100_000
    if os.environ.get("FSB_SCREENSHOT_OUT"):  # a relative path is the checkout's (the test runs in a temporary folder)
        (REPO / os.environ["FSB_SCREENSHOT_OUT"]).write_bytes(shot)

    export = tmp_path / "export.json"
    export.write_text(json.dumps(admin.call("GET", f"/api/projects/{project}/export?exportType=JSON")))
    judgments = tmp_path / "judgments.csv"
    proc = fsb("annotate", "import", str(export), "--format", "label-studio", "--tuples", str(design), "--out", str(judgments))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["judgments"] == N_TASKS
    got = pd.read_csv(judgments)
    assert sorted(zip(got["BestItem"], got["WorstItem"], got["Annotator"])) == sorted((b, w, uid) for _, b, w in clicks)

    scores = tmp_path / "scores.csv"
    proc = fsb("score", str(judgments), "--out", str(scores))
    assert proc.returncode == 0, proc.stderr
    table = pd.read_csv(scores).set_index("item")
    # Counting on the clicks: (times best - times worst) / times shown, per item (the file carries 6 decimals).
    shown_n: dict[int, int] = {}
    best_n: dict[int, int] = {}
    worst_n: dict[int, int] = {}
    for shown, b, w in clicks:
        for i in shown:
            shown_n[i] = shown_n.get(i, 0) + 1
        best_n[b] = best_n.get(b, 0) + 1
        worst_n[w] = worst_n.get(w, 0) + 1
    assert sorted(table.index) == sorted(shown_n)
    for i, n in shown_n.items():
        raw = (best_n.get(i, 0) - worst_n.get(i, 0)) / n
        row = table.loc[i]
        assert (row["n"], row["best"], row["worst"]) == (n, best_n.get(i, 0), worst_n.get(i, 0)), f"item {i}"
        assert row["score_raw"] == pytest.approx(raw, abs=1e-6) and row["score"] == pytest.approx((raw + 1) / 2, abs=1e-6), f"item {i}"

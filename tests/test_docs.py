"""The docs as a newcomer meets them: the README's links resolve and its quoted figures agree with the
pages they come from; the site builds strictly from the code, and headless Chromium shows its navigation,
its diagram and a CLI reference that lists every `fsb` subcommand."""

from __future__ import annotations

import argparse
import functools
import http.server
import importlib.util
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
# The nav entries a person looks for first (mkdocs.yml); each must be on the rendered home page.
NAV = ("The dataset", "Evaluating a model", "Best-worst scaling", "Generating text", "Publishing", "Analyses",
       "Reproducibility", "Speed", "Layout", "Command line", "Bibliography")  # fmt: skip


def _gen_ref():
    spec = importlib.util.spec_from_file_location("gen_ref", ROOT / "docs" / "gen_ref.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a heading (lower case, punctuation dropped, spaces to hyphens)."""
    text = re.sub(r"`|\{#[^}]*\}", "", heading).strip().lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(md: Path) -> set[str]:
    text = md.read_text()
    explicit = set(re.findall(r"\{#([\w-]+)\}", text))
    return explicit | {_slug(h) for h in re.findall(r"^#{1,6}\s+(.*)$", text, flags=re.M)}


def test_readme_relative_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    relative = [link for link in links if not re.match(r"^[a-z]+:", link) and not link.startswith("#")]
    assert len(relative) >= 8, relative  # the README is the way into the docs
    broken = []
    for link in relative:
        path, _, anchor = link.partition("#")
        target = ROOT / path
        if not target.exists():
            broken.append(f"{link}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link}: no heading with anchor #{anchor}")
    assert not broken, broken


def test_readme_is_short_and_carries_the_headline_figures() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 150
    for figure in ("0.8720 ± 0.0056", "0.8634 ± 0.0061", "0.932", "0.965", "0.436", "0.813", "0.706", "make main", "make test"):
        assert figure in readme, figure
    assert not re.search(r"\bissue \d+", readme, flags=re.I), "internal work-item numbers in the README"
    assert "load average" not in readme


def test_readme_main_job_time_is_the_measured_page_line() -> None:
    gen_ref = _gen_ref()
    page = ROOT / "docs" / "figures" / "main-job.md"
    text = page.read_text() if page.exists() else gen_ref.PLACEHOLDERS["figures/main-job.md"]
    marked = [ln.removeprefix(gen_ref.MAIN_JOB_MARK).strip() for ln in text.splitlines() if ln.startswith(gen_ref.MAIN_JOB_MARK)]
    assert len(marked) == 1, f"{page} must hold one line starting with {gen_ref.MAIN_JOB_MARK}"
    lines = (ROOT / "README.md").read_text().splitlines()
    at = [i for i, ln in enumerate(lines) if ln.startswith("<!-- fsb-main-job-total")]
    assert len(at) == 1 and at[0] + 1 < len(lines)
    assert lines[at[0] + 1].strip() == marked[0]


def test_cli_walk_is_generic() -> None:
    """The CLI reference walks any parser: nested subcommands, every option, choices, defaults, help with %%."""
    gen_ref = _gen_ref()
    top = argparse.ArgumentParser(prog="tool", description="a tool")
    sub = top.add_subparsers(dest="command", required=True)
    one = sub.add_parser("alpha", help="the first, 95%% of the time")
    one.add_argument("path", help="an input")
    one.add_argument("--mode", choices=("x", "y"), default="y", help="pick | choose")
    nested = sub.add_parser("beta", help="has its own subcommands").add_subparsers(dest="action", required=True)
    deep = nested.add_parser("gamma", help="two levels down")
    deep.add_argument("--items", action="append", required=True, help="repeatable")
    page = "\n".join(gen_ref.cli_sections(top, "tool"))
    for expected in ("## `tool`", "### `tool alpha`", "### `tool beta`", "#### `tool beta gamma`", "`--mode {x,y}`",
                     "one of `x`, `y`; default `y`", "pick \\| choose", "95% of the time", "required; may be repeated"):  # fmt: skip
        assert expected in page, (expected, page)


def test_card_fields_all_described() -> None:
    gen_ref = _gen_ref()
    sys.path[:0] = [str(ROOT / "build"), str(ROOT)]
    import fifty_shades_of_bias as spec

    meanings = gen_ref.card_meanings()
    for config in spec.CONFIGS:
        undescribed = set(spec.features(config)) - set(meanings.get(config, {}))
        assert not undescribed, f"{config}: fields without a meaning in dataset_card/card.md: {sorted(undescribed)}"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as `make docs` builds it: references generated from the code, then a strict build."""
    out = tmp_path_factory.mktemp("site")
    gen = subprocess.run([sys.executable, str(ROOT / "docs" / "gen_ref.py")], cwd=ROOT, capture_output=True, text=True)
    assert gen.returncode == 0, gen.stderr
    mkdocs = Path(sys.executable).with_name("mkdocs")
    built = subprocess.run([str(mkdocs), "build", "--strict", "--quiet", "--site-dir", str(out)], cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def served(site: Path) -> Iterator[tuple[str, list[tuple[str, int]]]]:
    """The built site on 127.0.0.1 (a free port), with the log of (path, status) it answered."""
    log: list[tuple[str, int]] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            log.append((self.path, int(code)))

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed (apt-get install chromium); CI installs it")
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1280,900"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


def _dom(url: str) -> str:
    result = _chromium("--virtual-time-budget=5000", "--dump-dom", url)
    assert result.returncode == 0 and "<html" in result.stdout, result.stderr[-2000:]
    return result.stdout


def _screenshot(url: str, path: Path) -> None:
    result = _chromium(f"--screenshot={path}", "--virtual-time-budget=5000", url)
    assert result.returncode == 0 and path.exists(), result.stderr[-2000:]
    from PIL import Image

    with Image.open(path) as img:
        colours = img.convert("L").getextrema()
    assert colours[1] - colours[0] > 100, f"{path} is blank"  # text on a page, not a white rectangle


@pytest.mark.slow
@pytest.mark.server
def test_home_page_in_chromium(served: tuple[str, list[tuple[str, int]]], tmp_path: Path) -> None:
    base, log = served
    dom = _dom(base + "/")
    start, end = dom.find("md-nav--primary"), dom.find('class="md-content"')
    assert 0 <= start < end, "no primary navigation rendered before the page's content"
    nav = re.sub(r"<[^>]+>", " ", dom[start:end])
    missing = [entry for entry in NAV if entry not in nav]
    assert not missing, f"navigation lacks {missing}"
    img = re.search(r'<img[^>]+src="([^"]*data-flow\.svg)"', dom)
    assert img, "the data-flow diagram is not on the home page"
    assert ("/assets/data-flow.svg", 200) in log, f"Chromium did not load the diagram: {log}"
    _screenshot(base + "/", tmp_path / "home.png")


@pytest.mark.slow
@pytest.mark.server
def test_cli_reference_in_chromium(served: tuple[str, list[tuple[str, int]]], tmp_path: Path) -> None:
    base, _ = served
    dom = _dom(base + "/reference/cli/")
    sys.path[:0] = [str(ROOT / "build"), str(ROOT)]
    gen_ref = _gen_ref()
    parser = gen_ref.cli_parser()
    names = [f"fsb {n}" for n, _, _ in gen_ref._subcommands(parser)]
    nested = [f"fsb {n} {m}" for n, _, sub in gen_ref._subcommands(parser) for m, _, _ in gen_ref._subcommands(sub)]
    assert len(names) >= 10 and nested, (names, nested)
    text = re.sub(r"<[^>]+>", "", dom)
    missing = [name for name in names + nested if name not in text]
    assert not missing, f"the CLI reference lacks {missing}"
    assert "--raw-dir" in text or "--out" in text  # options are listed, not only commands
    _screenshot(base + "/reference/cli/", tmp_path / "cli.png")


@pytest.mark.slow
@pytest.mark.server
def test_analyses_figures_in_chromium(site: Path, served: tuple[str, list[tuple[str, int]]]) -> None:
    """The paper's figures, rendered by `make docs` from the release with fsb's analysis code, load in the page."""
    if not (site / "reference" / "figures" / "score_histogram.png").exists():
        pytest.skip("no local copy of the release: gen_ref.py rendered no analysis figures")
    base, log = served
    dom = _dom(base + "/analyses/")
    assert re.search(r'<img[^>]+src="[^"]*score_histogram\.png"', dom), "the score histogram is not on the analyses page"
    assert ("/reference/figures/score_histogram.png", 200) in log, f"Chromium did not load the histogram: {log}"

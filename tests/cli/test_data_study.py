"""Issue 19 through the real `fsb` command: a non-FSB best-worst study (string ids, control rows, an e-mail
and a phone number among the annotators) built with `fsb build --annotations --items --study`, loaded with
`datasets.load_dataset` (both configs); the study's wording reaching `fsb annotate export`; annotator ids
pseudonymised by default on every path; the default export byte-identical to what it was before studies."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pandas as pd
import pytest

import fifty_shades_of_bias as spec
from fsb.cli import main
from fsb.data.annotators import PREFIX, annotator_key, pseudonym
from tests._support import make_raw
from tests.data.study_fixture import EMAIL, PHONE, STUDY_YAML, WORKERS, make_study, published_text


def fsb(*args: str | Path, home: Path | None = None, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = dict(os.environ, **(env or {}))
    if home is not None:
        environ["FSB_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "fsb", *map(str, args)], capture_output=True, text=True, check=False, env=environ, timeout=600
    )


def one_line_refusal(proc: subprocess.CompletedProcess[str], command: str, words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"fsb {command}: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr and words in proc.stderr, proc.stderr


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return make_study(tmp_path_factory.mktemp("study"))


@pytest.fixture(scope="module")
def built(study: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One study build through the CLI, with its own $FSB_HOME (the pseudonym key lives there)."""
    home = tmp_path_factory.mktemp("home")
    out = tmp_path_factory.mktemp("built") / "offensiveness"
    proc = fsb(
        "build", "--annotations", study["judgments"], "--items", study["items"], "--study", study["study"], "--out", out,
        "--invalid", "count", "--trials", "10", "--bootstrap", "50", "--seed", "7", home=home,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {"out": out, "home": home, "proc": proc}


def test_a_study_builds_through_the_cli_and_loads_with_both_configs(built: dict[str, object], study: dict[str, Path]) -> None:
    out, proc = Path(str(built["out"])), built["proc"]
    assert isinstance(proc, subprocess.CompletedProcess)
    lines = proc.stdout.splitlines()
    assert lines[0] == f"built {out.resolve()}"
    assert "95% intervals: bootstrap over tuples, 50 resamples, seed 7" in proc.stdout, "--bootstrap and --seed reach the build"
    assert "split-half reliability (10 trials, seed 7" in proc.stdout
    assert "irregular judgments (count): 1 with repeated item" in proc.stderr, "the control rows are reported as commentary"
    assert "not recorded as the build loaders find" in proc.stderr

    ds = datasets.load_dataset(str(out), split="test")
    ann = datasets.load_dataset(str(out), "annotations", split="test")
    items = pd.read_csv(study["items"], dtype=str)
    assert ds.features["id"].dtype == "string" and sorted(ds["id"]) == sorted(items["id"]), "string ids stay strings"
    assert dict(zip(ds["id"], ds["text"])) == dict(zip(items["id"], items["text"]))
    frame = ds.to_pandas()
    assert ((frame["score_ci_low"] <= frame["score"]) & (frame["score"] <= frame["score_ci_high"])).all()
    assert ann.num_rows == len(pd.read_csv(study["judgments"])), "the two control rows are counted (--invalid count)"
    assert all(isinstance(i, str) for row in ann["items"] for i in row)
    assert all(a.startswith(PREFIX) for a in ann["annotator"]), "pseudonyms by default"
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "Offensiveness of comments (simulated)" in card and "Which comment is the MOST offensive" in card
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert stats["intervals"]["resamples"] == 50 and stats["intervals"]["seed"] == 7


def test_a_study_build_is_never_the_last_build_and_publishes_like_fsbs(built: dict[str, object]) -> None:
    home = Path(str(built["home"]))
    assert not (home / "last_build.json").exists(), "loaders and the lm-eval task keep reading FSB's build"
    proc = fsb("publish", Path(str(built["out"])), "--repo-id", "someone/offensiveness", "--version", "1.0.0", "--local", home=home)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("local checks passed") and "data/annotations/test-" in proc.stdout


def test_the_email_annotator_never_reaches_a_file_or_the_terminal_in_the_clear(built: dict[str, object], tmp_path: Path) -> None:
    out, home = Path(str(built["out"])), Path(str(built["home"]))
    proc = built["proc"]
    assert isinstance(proc, subprocess.CompletedProcess)
    key = annotator_key(home)
    text = published_text(out)
    for personal in (EMAIL, PHONE):
        assert personal not in text and personal not in proc.stdout + proc.stderr
        assert pseudonym(personal, key) in text
    assert "worker1" not in text, "other ids are pseudonymised too by default"
    # --keep-annotator-ids keeps worker ids as given, never the e-mail address or the phone number; --json too
    kept = tmp_path / "kept"
    src = make_study(tmp_path / "s")
    proc = fsb("build", "--annotations", src["judgments"], "--out", kept, "--invalid", "count", "--trials", "5",
               "--keep-annotator-ids", "--json", home=home)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["stats"] == json.loads((kept / "stats.json").read_text(encoding="utf-8")), "--json prints stats.json"
    assert EMAIL not in proc.stdout + proc.stderr and PHONE not in proc.stdout + proc.stderr
    kept_text = published_text(kept)
    assert EMAIL not in kept_text and PHONE not in kept_text
    ann = datasets.load_dataset(str(kept), "annotations", split="test")
    assert {"worker1", "w3", "w4"} <= set(ann["annotator"])
    assert set(ann["annotator"]) == {w if w not in (EMAIL, PHONE) else pseudonym(w, key) for w in WORKERS}


def test_fsb_build_keeps_annotator_ids_only_when_asked(tmp_path: Path) -> None:
    """FSB's own build (a generations file) takes --keep-annotator-ids too; by default it pseudonymises."""
    gens, plain = make_raw(tmp_path / "raw", n=12)
    rows = pd.read_csv(plain)
    rows["Annotator"] = ["ann-a", "ann-b"] * (len(rows) // 2)
    annotations = tmp_path / "with_annotators.csv"
    rows.to_csv(annotations, index=False)
    for flag, out in (((), tmp_path / "default"), (("--keep-annotator-ids",), tmp_path / "kept")):
        proc = fsb("build", "--generations", gens, "--annotations", annotations, "--out", out, "--no-record", "--trials", "5", *flag)
        assert proc.returncode == 0, proc.stderr
    key = annotator_key()
    assert set(spec.load("annotations", source=str(tmp_path / "default"))[spec.SPLIT]["annotator"]) == {
        pseudonym("ann-a", key),
        pseudonym("ann-b", key),
    }
    assert set(spec.load("annotations", source=str(tmp_path / "kept"))[spec.SPLIT]["annotator"]) == {"ann-a", "ann-b"}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--generations", "G", "--items", "I"], "--items and --study belong to a study build"),
        (["--raw-dir", "R", "--study", "S"], "--items and --study belong to a study build"),
        (["--rounds", "M", "--items", "I"], "--items and --study belong to a study build"),
        (["--study", "S"], "--items and --study need --annotations"),
        (["--generations", "G", "--annotations", "A", "--bootstrap", "10"], "--bootstrap sets a study build's intervals"),
        (["--annotations", "A", "--previous", "P"], "--previous is for FSB's build"),
        (["--annotations", "A", "--bootstrap", "0"], "argument --bootstrap: must be at least 1"),
        (["--annotations", "A", "--bootstrap", "10001"], "at most 10000 bootstrap resamples"),
    ],
)
def test_study_options_in_the_wrong_place_are_one_line_refusals(args: list[str], words: str, tmp_path: Path) -> None:
    proc = fsb("build", *args, "--out", tmp_path / "out")
    one_line_refusal(proc, "build", words)
    assert not (tmp_path / "out").exists()


def test_a_study_build_is_never_put_where_loaders_look_for_fsbs(study: dict[str, Path], tmp_path: Path) -> None:
    """Without --out a study build would land in ./fifty_shades_of_bias, which every loader takes for FSB's build."""
    proc = subprocess.run(
        [sys.executable, "-m", "fsb", "build", "--annotations", str(study["judgments"]), "--invalid", "count"],
        capture_output=True, text=True, check=False, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    one_line_refusal(proc, "build", "a study build needs --out")
    assert not (tmp_path / spec.NAME).exists()


def test_a_study_build_never_replaces_a_folder_holding_its_input(study: dict[str, Path], tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    judgments = folder / "judgments.csv"
    judgments.write_bytes(study["judgments"].read_bytes())
    before = sorted(p.name for p in folder.iterdir())
    proc = fsb("build", "--annotations", judgments, "--out", folder, "--invalid", "count")
    one_line_refusal(proc, "build", "holds the input")
    assert sorted(p.name for p in folder.iterdir()) == before


# --- fsb annotate export --study ---------------------------------------------------------------------

ITEMS = 'id,text\n1,"The first text, with a comma"\n2,The second text\n3,"A ""quoted"" third"\n4,Fourth\n5,Fifth text here\n6,Sixth\n'
DESIGN = "tuple_id,Item1,Item2,Item3,Item4\n0,1,2,3,4\n1,5,6,1,2\n2,3,4,5,6\n"
# sha256 of the default exports (no --study) made by main before `--study` existed (8c13ae1), reproduced after it
DEFAULT_EXPORT_SHA256 = {
    "forms.csv": "5508ed7dad8284e7468950d6bfd18bf328d5ba4be18001b39665f434ac6c33c6",
    "ls/labeling_config.xml": "1d22c58586ad4d1bdf6484cacf99e2dea21cdf2ac9140b05627b3a7656cb4783",
    "ls/tasks.json": "f0c12a1ea921debb0c0cd67b8558857c5ffb2bf53706638b975a3c74a7594113",
}


@pytest.fixture
def design(tmp_path: Path) -> dict[str, Path]:
    (tmp_path / "items.csv").write_text(ITEMS, encoding="utf-8")
    (tmp_path / "design.csv").write_text(DESIGN, encoding="utf-8")
    (tmp_path / "study.yaml").write_text(STUDY_YAML, encoding="utf-8")
    (tmp_path / "out").mkdir()
    return {"items": tmp_path / "items.csv", "design": tmp_path / "design.csv", "study": tmp_path / "study.yaml", "out": tmp_path / "out"}


def export(design: dict[str, Path], out: Path, *extra: str) -> int:
    """`fsb annotate export` in process, through the CLI's own entry point."""
    return main(["annotate", "export", str(design["design"]), "--items", str(design["items"]), "--out", str(out), *extra])


def test_without_study_the_export_is_byte_identical_to_before(design: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = design["out"]
    assert export(design, out / "forms.csv") == 0
    assert export(design, out / "ls", "--format", "label-studio") == 0
    got = {rel: hashlib.sha256((out / rel).read_bytes()).hexdigest() for rel in DEFAULT_EXPORT_SHA256}
    assert got == DEFAULT_EXPORT_SHA256
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == ["forms.csv", "ls"], "no instructions file"
    assert "instructions" not in capsys.readouterr().err  # the commentary (on stderr) names no instructions file


def test_study_wording_reaches_the_forms_and_the_label_studio_config(design: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    out = design["out"]
    assert export(design, out / "forms.csv", "--study", str(design["study"])) == 0
    assert (out / "forms.csv").read_bytes() == default_forms(design, out.parent / "plain"), "the forms themselves do not change"
    guide = (out / "forms.instructions.txt").read_text(encoding="utf-8")
    assert guide.startswith("Which comment is the MOST offensive, and which the LEAST?")
    assert "'Most offensive'" in guide and "'Least offensive'" in guide and "judged more offensive" in guide
    assert "wrote the study's instructions for annotators -> " in capsys.readouterr().err  # commentary: stderr
    assert export(design, out / "ls", "--format", "label-studio", "--study", str(design["study"])) == 0
    config = (out / "ls" / "labeling_config.xml").read_text(encoding="utf-8")
    assert 'value="Which comment is the MOST offensive, and which the LEAST?"' in config
    assert 'value="Most offensive"' in config and 'value="Least offensive"' in config
    assert "biased" not in config, "none of FSB's wording is left"
    assert 'name="best"' in config and 'name="worst"' in config, "the choice names `fsb annotate import` reads are kept"
    # a rerun replaces both files of the unit (both recorded as fsb's); a hand-edited instructions file is refused
    assert export(design, out / "forms.csv", "--study", str(design["study"])) == 0
    capsys.readouterr()  # the rerun's commentary names the file too: only the refusal below may
    (out / "forms.instructions.txt").write_text("my own instructions\n", encoding="utf-8")
    forms_before = (out / "forms.csv").read_bytes()
    assert export(design, out / "forms.csv", "--study", str(design["study"])) == 2
    assert "forms.instructions.txt" in capsys.readouterr().err
    assert (out / "forms.instructions.txt").read_text(encoding="utf-8") == "my own instructions\n"
    assert (out / "forms.csv").read_bytes() == forms_before, "nothing changed when the command reports failure"


def default_forms(design: dict[str, Path], folder: Path) -> bytes:
    """The forms of the same design without --study, written into `folder`."""
    folder.mkdir(exist_ok=True)
    assert export(design, folder / "forms.csv") == 0
    return (folder / "forms.csv").read_bytes()


def test_a_bad_study_file_is_refused_before_anything_is_written(design: dict[str, Path], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("question: [not, text]\n", encoding="utf-8")
    proc = fsb("annotate", "export", design["design"], "--items", design["items"], "--out", design["out"] / "forms.csv", "--study", bad)
    one_line_refusal(proc, "annotate", "question must be a plain string")
    assert list(design["out"].iterdir()) == []


def test_the_instructions_file_may_not_be_an_input(design: dict[str, Path]) -> None:
    guide = design["out"] / "forms.instructions.txt"
    guide.write_text(STUDY_YAML, encoding="utf-8")
    proc = fsb("annotate", "export", design["design"], "--items", design["items"], "--out", design["out"] / "forms.csv", "--study", guide)
    one_line_refusal(proc, "annotate", "is an input of this command (--study)")
    assert guide.read_text(encoding="utf-8") == STUDY_YAML and not (design["out"] / "forms.csv").exists()


# --- secrets in whatever the CLI prints ----------------------------------------------------------------

SECRET = "sk-test-5ecret-Value-0123456789"


def test_an_expected_failure_never_prints_a_secret(tmp_path: Path) -> None:
    env = {"OPENAI_API_KEY": SECRET}
    proc = fsb("score", tmp_path / f"{SECRET}.csv", env=env)
    one_line_refusal(proc, "score", "***")
    assert SECRET not in proc.stderr
    proc = fsb("score", "--bootstrap", SECRET, tmp_path / "x.csv", env=env)  # a usage error echoes the value
    assert proc.returncode == 2 and SECRET not in proc.stderr and "***" in proc.stderr


def test_the_cli_installs_log_redaction_before_the_command_runs() -> None:
    """A library's log record printed during a command (huggingface_hub's and urllib3's retry warnings name
    URLs) and the command's failure are both redacted: the key, and a URL's user info and token."""
    code = (
        "import logging, sys\n"
        "import fsb.data.release as release\n"
        "from fsb.core.errors import FsbError\n"
        "def fetch(**kw):\n"
        f"    logging.getLogger('urllib3').warning('retrying https://user:pw@hub.example/x?token=%s', {SECRET!r})\n"
        f"    raise FsbError('gave up on https://user:pw@hub.example/x with key {SECRET}')\n"
        "release.fetch_release = fetch\n"
        "from fsb.cli import main\n"
        "sys.exit(main(['fetch-release']))\n"
    )
    env = dict(os.environ, OPENAI_API_KEY=SECRET)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "retrying" in proc.stderr and "fsb fetch-release: error: gave up on https://" in proc.stderr
    assert SECRET not in proc.stderr and "pw@" not in proc.stderr

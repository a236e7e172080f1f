"""The whole update path, end to end: v1.0.0 is the release built the plain way and published to the test
Hub; round 2's sentences come from `fsb generate --first-uid 1001` against the real `transformers serve`
(a tiny random model: its words are noise, its rows are real), `fsb tuples --extend` ties them to the
release's tuples, a simulated annotator pool answers through `fsb annotate import`, `fsb build --rounds`
builds v1.1.0 with the changes since the Hub's v1.0.0 in its card, `fsb diff` compares the folders, and
`fsb publish` puts v1.1.0 over v1.0.0; both tags load with `datasets.load_dataset(..., revision=...)`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tests._fake_hub import FakeHub
from tests._support import run_fsb, write_csv
from tests.data.test_publish import REPO, TOKEN, fsb_publish, hub_env
from tests.generate.test_generate import TINY, write_seed_file

GEN = Path("FSB") / "FSB_text.csv"
ANN = Path("FSB") / "fsb-tuples-annotations.csv"

LOAD = r"""
import json, sys
import datasets
out = {}
for revision in sys.argv[2:]:
    ds = datasets.load_dataset(sys.argv[1], revision=revision)["test"]
    ann = datasets.load_dataset(sys.argv[1], "annotations", revision=revision)["test"]
    d, a = ds.to_dict(), ann.to_dict()
    out[revision] = {"id": d["id"], "round": d["round"], "score_maxdiff": d["score_maxdiff"], "ann_round": a["round"],
                     "annotator": a["annotator"], "n": ds.num_rows, "n_ann": ann.num_rows}
print(json.dumps(out))
"""


def run(
    *args: object, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    proc = run_fsb(*args, env=env, cwd=cwd, timeout=timeout)
    assert proc.returncode == 0, f"fsb {args[0]}: {proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr
    return proc


def pool_answers(design: pd.DataFrame, truth: dict[int, float], path: Path, seed: int = 0) -> Path:
    """A simulated pool of 5 annotators of different care (noise scale 0.5..1.5 on the logit): each tuple is
    answered by 3 of them; best = argmax(u + noise), worst = argmin of the rest (the best-worst logit per annotator)."""
    rng = np.random.default_rng(seed)
    noise = {f"ann-{i}": s for i, s in enumerate((0.5, 0.75, 1.0, 1.25, 1.5))}
    rows = []
    for rec in design.itertuples(index=False):
        items = [rec.Item1, rec.Item2, rec.Item3, rec.Item4]
        u = np.array([truth[i] for i in items])
        for who in rng.choice(sorted(noise), size=3, replace=False):
            x = u + noise[who] * rng.gumbel(size=4)
            best = int(np.argmax(x))
            y = -u + noise[who] * rng.gumbel(size=4)
            y[best] = -np.inf
            rows.append([rec.tuple_id, items[best], items[int(np.argmax(y))], who])
    return write_csv(path, ["tuple_id", "best", "worst", "annotator"], rows)


@pytest.mark.slow
def test_round_two_from_generation_to_two_loadable_tags(release: Path, tiny_server: str, tiny_model: Path, tmp_path: Path) -> None:
    home = tmp_path
    v1 = home / "v1" / "fifty_shades_of_bias"
    run("build", "--raw-dir", release, "--out", v1, "--hub-id", REPO, "--no-record")

    # round 2: 8 seeds x 2 formats through the real server, numbered past the release's 1000 uids
    r2 = home / "round2"
    r2.mkdir()
    seeds = write_seed_file(r2 / "seeds.jsonl")
    gens = r2 / "generations.jsonl"
    run("generate", "--seeds", seeds, "--out", gens, "--model", tiny_model, "--base-url", tiny_server, "--first-uid", 1001, *TINY)
    rows = [json.loads(line) for line in gens.read_text(encoding="utf-8").splitlines() if line.strip()]
    new_ids = [r["uid"] for r in rows]
    assert new_ids == list(range(1001, 1017)) and all(r["response"].strip() for r in rows)

    # the extension design: every new sentence in 8 tuples, each tuple with >= 1 release sentence
    design_path = r2 / "design.csv"
    check = json.loads(run("tuples", gens, "--extend", release / ANN, "--out", design_path, "--seed", 0).stdout)
    assert check["new_item_appearances_min"] == check["new_item_appearances_max"] == 8
    assert check["tuples_without_existing_item"] == 0 and check["max_shared_items"] <= 2 and check["first_tuple_id"] == 2000
    design = pd.read_csv(design_path)
    assert len(design) == check["new_tuples"] == -(-16 * 8 // 3)

    # a simulated annotator pool; old sentences' truth from the release's scores, new ones' drawn
    scores = pd.read_csv(release / "FSB" / "fsb_final_scores.csv").set_index("id")["score_normalized"]
    rng = np.random.default_rng(7)
    truth = {int(i): 6 * (s - 0.5) for i, s in scores.items()} | {i: float(rng.normal(0, 1.5)) for i in new_ids}
    pool_answers(design, truth, home / "answers.csv")

    # as the README writes it, from a folder holding the release's FSB/: the forms join both item files
    (home / "FSB").symlink_to(release / "FSB", target_is_directory=True)
    alone = subprocess.run(
        [sys.executable, "-m", "fsb", "annotate", "export", "round2/design.csv", "--items", "round2/generations.jsonl", "--out", "f.csv"],
        cwd=home,
        capture_output=True,
        text=True,
        check=False,
    )
    assert alone.returncode == 2 and "no such item in round2/generations.jsonl" in alone.stderr
    export = ("annotate", "export", "round2/design.csv", "--items", "FSB/FSB_text.csv", "--items", "round2/generations.jsonl")
    run(*export, "--out", "round2/forms.csv", cwd=home)
    forms = pd.read_csv(r2 / "forms.csv")
    texts = dict(zip(pd.read_csv(release / GEN)["uid"], pd.read_csv(release / GEN)["response"])) | {r["uid"]: r["response"] for r in rows}
    shown = forms[[f"Item{j}" for j in range(1, 5)]].to_numpy()
    assert (forms[[f"Text{j}" for j in range(1, 5)]].to_numpy() == np.vectorize(texts.get)(shown)).all()
    assert (shown <= 1000).any(axis=1).all() and (shown > 1000).sum() == 16 * 8
    run("annotate", "import", "answers.csv", "--tuples", "round2/forms.csv", "--out", "round2/judgments.csv", cwd=home)

    manifest = home / "rounds.yaml"
    manifest.write_text(
        "rounds:\n"
        "  - {round: 1, name: release, generations: FSB/FSB_text.csv, annotations: FSB/fsb-tuples-annotations.csv}\n"
        "  - {round: 2, name: tiny model round, generations: round2/generations.jsonl, annotations: round2/judgments.csv}\n",
        encoding="utf-8",
    )

    with FakeHub(TOKEN) as hub:
        first = fsb_publish(hub, home, str(v1), "--repo-id", REPO, "--version", "1.0.0")
        assert first.returncode == 0, first.stderr

        # v1.1.0: built over both rounds, its card carrying the changes since the Hub's v1.0.0
        v2 = home / "v2" / "fifty_shades_of_bias"
        built = run(
            "build",
            "--rounds",
            manifest,
            "--out",
            v2,
            "--hub-id",
            REPO,
            "--previous",
            f"{REPO}@v1.0.0",
            "--no-record",
            env=hub_env(hub, home, token=None),
        )
        assert "round 2 (tiny model round): 16 sentences" in built.stdout
        card = (v2 / "README.md").read_text(encoding="utf-8")
        assert "## Changes since v1.0.0" in card and "sentences: 1000 -> 1016 (+16 added, -0 removed, 1000 in both)" in card
        assert "Round 1 (release): the release of `microsoft/fifty-shades-of-bias`" in card
        assert "Built from the release of" not in card, "v1.1.0 is the release plus a round, not the release"
        assert "rounded scores" not in card and f'load_dataset("{REPO}")' in card
        stats = json.loads((v2 / "stats.json").read_text(encoding="utf-8"))
        assert stats["release"]["rounds"] == [1] and not stats["release"]["is_release"]
        assert stats["rounds"][1]["annotators"]["n"] == 5 and stats["rounds"][1]["judgments"] == 3 * len(design)
        assert stats["rounds"][1]["tuples_linking_earlier_rounds"] == len(design)

        diff = run("diff", v1, v2).stdout
        assert "sentences: 1000 -> 1016 (+16 added" in diff and f"judgments: 5360 -> {5360 + 3 * len(design)}" in diff

        second = fsb_publish(hub, home, str(v2), "--repo-id", REPO, "--version", "1.1.0")
        assert second.returncode == 0, second.stderr
        repo = hub.repo(REPO)
        assert "changes from v1.0.0" in repo.tag_messages["v1.1.0"] and "+16 added" in repo.tag_messages["v1.1.0"]
        assert "+16 added" in repo.commits[repo.tags["v1.1.0"]].description

        proc = subprocess.run(
            [sys.executable, "-c", LOAD, REPO, "v1.0.0", "v1.1.0"],
            env=hub_env(hub, home, token=None),
            cwd=home,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    loaded: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    old, new = loaded["v1.0.0"], loaded["v1.1.0"]
    assert old["n"] == 1000 and set(old["round"]) == {1} and old["n_ann"] == 5360
    assert new["n"] == 1016 and sorted(i for i, r in zip(new["id"], new["round"]) if r == 2) == new_ids
    assert new["ann_round"].count(2) == 3 * len(design) and set(new["annotator"][:5360]) == {None}
    # the release's sentences stay on their scale: their MaxDiff scores barely move between the tags
    before = dict(zip(old["id"], old["score_maxdiff"]))
    after = dict(zip(new["id"], new["score_maxdiff"]))
    moves = np.array([after[i] - before[i] for i in before])
    assert np.abs(moves).mean() < 0.05 * np.std(list(before.values()))

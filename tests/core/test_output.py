"""Issue 20: one output layer every command writes through (fsb.core.output). The cases of the adversarial
pass that lie in the output layer, the CLI, generate, annotate and the request engine, each reproduced end
to end through the CLI in a subprocess: collisions refused even with --force, devices and FIFOs refused,
files recognised only by their record, hand edits never discarded, only registered temporaries swept, and
the multi-file outputs written as one unit under kill -9."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fsb.core.output import OutputPlan, recover_units, write_unit
from fsb.core.readers import InputError

SOURCES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "seed-sources"  # ../shared beside the checkout
COPA = SOURCES / "balacopa-dev-all.xml"
STEREOSET = SOURCES / "editbias_gender_test.json"


def fsb(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return subprocess.run(
        [sys.executable, "-m", "fsb", *map(str, args)], capture_output=True, text=True, check=False, env={**clean, **(env or {})}
    )


def refused(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit 2, one line on stderr, no traceback, naming each of `words`."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.name.startswith(".fsb-")}


def seed_file(path: Path) -> Path:
    rows = [
        {"seed": t, "seed_type": st, "source": "test", "source_id": str(i)}
        for i, (st, t) in enumerate(
            [("explicit", "My mother is a nurse."), ("implicit", "The vase broke."), ("neutral", "The cat ran."), ("random", "It rained.")]
        )
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def generate(tmp: Path, *extra: str | Path) -> subprocess.CompletedProcess[str]:
    from fsb.data.release import find_local_release

    ic = ["--ic-dir", find_local_release()] if find_local_release() else []  # the release's in-context examples
    return fsb("generate", "--seeds", tmp / "seeds.jsonl", "--model", "m", *ic, *extra)


def batch_answers(batch: Path, out: Path) -> Path:
    """A Batch API output answering every request of `batch` (so a run finishes without a server)."""
    lines = [json.loads(line) for line in batch.read_text().splitlines() if line.strip()]
    answers = []
    for i, line in enumerate(lines):
        body = {"id": f"c{i}", "object": "chat.completion", "created": 1_700_000_000, "model": "m"}
        body |= {"choices": [{"index": 0, "message": {"role": "assistant", "content": f"Answer {i}."}, "finish_reason": "stop"}]}
        answers.append({"id": f"b{i}", "custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}, "error": None})
    out.write_text("".join(json.dumps(a) + "\n" for a in answers))
    return out


# --- collisions: an output naming an input, the journal or another output, refused even with --force ------------


def test_generate_csv_naming_its_seeds_input_is_refused_even_with_force(tmp_path: Path) -> None:
    seeds = seed_file(tmp_path / "seeds.jsonl")
    before = seeds.read_bytes()
    proc = generate(tmp_path, "--out", tmp_path / "g.jsonl", "--csv", seeds, "--force", "--batch-file", tmp_path / "b.jsonl")
    refused(proc, str(seeds), "is an input of this command (--seeds)")
    assert seeds.read_bytes() == before and not (tmp_path / "b.jsonl").exists()


def test_an_input_reached_by_another_name_is_caught_by_inode(tmp_path: Path) -> None:
    seeds = seed_file(tmp_path / "seeds.jsonl")
    os.link(seeds, tmp_path / "alias.csv")  # the same file under another name: only its inode tells
    proc = generate(
        tmp_path, "--out", tmp_path / "g.jsonl", "--csv", tmp_path / "alias.csv", "--force", "--batch-file", tmp_path / "b.jsonl"
    )
    refused(proc, "is an input of this command (--seeds)")


@pytest.mark.parametrize("option", ["--csv", "--batch-file"])
def test_generate_side_output_naming_out_is_refused(tmp_path: Path, option: str) -> None:
    seed_file(tmp_path / "seeds.jsonl")
    out = tmp_path / "g.jsonl"
    extra = [option, out] + (["--batch-file", tmp_path / "b.jsonl"] if option == "--csv" else [])
    proc = generate(tmp_path, "--out", out, *extra, "--force")
    refused(proc, "name the same file")
    assert not out.exists()


def test_generate_csv_naming_the_journal_is_refused(tmp_path: Path) -> None:
    seed_file(tmp_path / "seeds.jsonl")
    out = tmp_path / "g.jsonl"
    assert generate(tmp_path, "--out", out, "--batch-file", tmp_path / "b.jsonl").returncode == 0
    journal = next(tmp_path.glob("g*journal*"))
    before = journal.read_bytes()
    proc = generate(tmp_path, "--out", out, "--csv", journal, "--force", "--collect", tmp_path / "b.jsonl")
    refused(proc, "--csv and the journal name the same file")
    assert journal.read_bytes() == before


def test_annotate_llm_judgments_naming_out_is_refused_and_nothing_changes(release_dataset: Path, tmp_path: Path) -> None:
    out = tmp_path / "llm.jsonl"
    out.write_text("")
    args = ["annotate", "llm", "--dataset", release_dataset, "--model", "m", "--sample", "4", "--out", out]
    proc = fsb(*args, "--judgments", out, "--force", "--batch-file", tmp_path / "b.jsonl")
    refused(proc, "name the same file")
    assert out.read_text() == "" and not (tmp_path / "b.jsonl").exists()


# --- recognised only by the record: another command's file is never taken for ours ---------------------------


def test_annotate_llm_never_takes_a_human_judgments_file_for_its_own(release_dataset: Path, tmp_path: Path) -> None:
    """`annotate import` wrote human.csv (same header as annotate llm's judgments): recorded as that kind, so
    `annotate llm --judgments human.csv` refuses it instead of overwriting the human judgments."""
    assert fsb("tuples", "8", "--appearances", "4", "--out", tmp_path / "design.csv").returncode == 0
    rows = [line.split(",") for line in (tmp_path / "design.csv").read_text().splitlines()[1:]]
    (tmp_path / "answers.csv").write_text("tuple_id,best,worst,annotator\n" + "".join(f"{r[0]},{r[1]},{r[2]},ann1\n" for r in rows))
    human = tmp_path / "human.csv"
    proc = fsb("annotate", "import", tmp_path / "answers.csv", "--tuples", tmp_path / "design.csv", "--out", human)
    assert proc.returncode == 0, proc.stderr
    before = human.read_bytes()
    args = ["annotate", "llm", "--dataset", release_dataset, "--model", "m", "--sample", "4", "--out", tmp_path / "llm.jsonl"]
    proc = fsb(*args, "--judgments", human, "--batch-file", tmp_path / "b.jsonl")
    refused(proc, str(human), "another command's output")
    assert human.read_bytes() == before


def test_a_sealed_folder_of_another_kind_is_never_accepted(release_dataset: Path, tmp_path: Path) -> None:
    """`fsb analyse --out <a dataset build>`: the build's seal says `fsb build`, so analyse refuses it, intact."""
    import shutil

    build = tmp_path / "build"
    shutil.copytree(release_dataset, build)
    before = {p.relative_to(build): p.read_bytes() for p in build.rglob("*") if p.is_file()}
    proc = fsb("analyse", release_dataset, "--out", build, "--top", "3")
    refused(proc, str(build), "another command's output")
    assert {p.relative_to(build): p.read_bytes() for p in build.rglob("*") if p.is_file()} == before


# --- devices and FIFOs are never outputs ---------------------------------------------------------------------


def test_score_out_a_fifo_or_device_is_refused_even_with_force(tmp_path: Path) -> None:
    judgments = tmp_path / "j.csv"
    judgments.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n1,2,3,4,1,4\n2,3,4,5,2,5\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused(fsb("score", judgments, "--out", fifo, "--force"), str(fifo), "device, FIFO or socket")
    assert fifo.is_fifo()
    refused(fsb("score", judgments, "--out", "/dev/null", "--force"), "/dev/null", "device, FIFO or socket")
    assert Path("/dev/null").is_char_device()


# --- hand edits are never discarded; only registered temporaries are swept --------------------------------------


def _finished_generate(tmp: Path) -> tuple[Path, Path, list[str]]:
    seed_file(tmp / "seeds.jsonl")
    out, csv = tmp / "g.jsonl", tmp / "g.csv"
    assert generate(tmp, "--out", out, "--batch-file", tmp / "b.jsonl").returncode == 0
    answers = batch_answers(tmp / "b.jsonl", tmp / "answers.jsonl")
    collect = ["--out", out, "--csv", csv, "--collect", answers]
    proc = generate(tmp, *collect)
    assert proc.returncode == 0, proc.stderr
    return out, csv, collect


@pytest.mark.parametrize("edited", ["out", "csv"])
def test_rerunning_a_finished_generate_never_drops_a_hand_edit(tmp_path: Path, edited: str) -> None:
    out, csv, collect = _finished_generate(tmp_path)
    assert generate(tmp_path, *collect).returncode == 0, "its own unchanged files: rewritten"
    target = out if edited == "out" else csv
    target.write_text(target.read_text().replace("Answer 1.", "Answer one, corrected by hand."))
    before = snapshot(tmp_path)
    proc = generate(tmp_path, *collect)
    refused(proc, str(target), "edited")
    assert snapshot(tmp_path) == before, "a refusal changes nothing"


def test_the_sweep_never_touches_a_users_file_named_like_a_temporary(tmp_path: Path) -> None:
    mine = [tmp_path / ".g.jsonl.deadbeef0000.tmp", tmp_path / ".g.csv.0123456789ab.tmp"]
    for p in mine:
        p.write_text("my notes\n")
    (tmp_path / ".g.jsonl.old-20261201abcd").mkdir()
    _finished_generate(tmp_path)
    assert all(p.read_text() == "my notes\n" for p in mine)
    assert (tmp_path / ".g.jsonl.old-20261201abcd").is_dir()


# --- the layer's API -------------------------------------------------------------------------------------------


def test_output_plan_refuses_before_writing_and_write_unit_records_each_kind(tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.json"
    write_unit({a: "1\n", b: "{}\n"}, kinds={a: "kind A", b: "kind B"})
    write_unit({a: "2\n", b: "[]\n"}, kinds={a: "kind A", b: "kind B"})  # its own unchanged files
    assert a.read_text() == "2\n" and b.read_text() == "[]\n"
    with pytest.raises(InputError, match="another command's output"):
        write_unit({a: "3\n"}, kinds="kind B")
    plan = OutputPlan("t", force=True)
    plan.input(a, "INPUT")
    plan.output(tmp_path / "x" / ".." / "a.csv", "--out", kind="kind A")
    with pytest.raises(InputError, match=r"is an input of this command \(INPUT\)"):
        plan.check()
    assert a.read_text() == "2\n"


# --- kill -9 at every step of a multi-file write: all old or all new --------------------------------------------

KILLER = """
import os, signal, sys
n, calls = int(sys.argv[1]), [0]
def step(real):
    def wrapped(*a, **k):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*a, **k)
    return wrapped
os.replace, os.fsync, os.unlink = step(os.replace), step(os.fsync), step(os.unlink)
from fsb.cli.app import main
sys.exit(main(sys.argv[2:]))
"""


def _kill_at_every_step(args: list[str], folder: Path, states: list[dict[str, bytes]], files: list[str]) -> int:
    """Run `fsb ARGS` killed at its 1st, 2nd, ... replace/fsync/unlink until one run finishes; after each
    kill, recover the folder as the next fsb run would, and check `files` are one of `states` whole."""
    for n in range(1, 400):
        proc = subprocess.run([sys.executable, "-c", KILLER, str(n), *args], capture_output=True, text=True, check=False)
        recover_units(folder)
        now = {f: (folder / f).read_bytes() for f in files if (folder / f).exists()}
        assert now in states, (n, proc.stderr, {f: v[:80] for f, v in now.items()})
        if proc.returncode != -signal.SIGKILL:
            assert proc.returncode == 0, proc.stderr
            return n - 1
    raise AssertionError("the command never finished")


def _random_kills(args: list[str], folder: Path, states: list[dict[str, bytes]], files: list[str], times: int) -> None:
    rng = random.Random(20)
    for _ in range(times):
        p = subprocess.Popen([sys.executable, "-m", "fsb", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, 1.2))
        p.send_signal(signal.SIGKILL)
        p.wait()
        recover_units(folder)
        now = {f: (folder / f).read_bytes() for f in files if (folder / f).exists()}
        assert now in states


@pytest.mark.slow
def test_kill_between_seeds_and_manifest_leaves_both_old_or_both_new(tmp_path: Path) -> None:
    folder = tmp_path / "s"
    folder.mkdir()
    out = folder / "seeds.jsonl"
    files = ["seeds.jsonl", "seeds.manifest.json"]
    base = ["seeds", "--copa", str(COPA), "--stereoset", str(STEREOSET), "--out", str(out)]
    counts = ["--explicit", "3", "--implicit", "3", "--neutral", "3", "--random", "3"]
    more = ["--explicit", "4", "--implicit", "4", "--neutral", "4", "--random", "4"]
    (tmp_path / "ref").mkdir()
    assert fsb(*base[:-1], str(tmp_path / "ref" / "seeds.jsonl"), *more).returncode == 0
    new = {f: (tmp_path / "ref" / f).read_bytes() for f in files}
    assert fsb(*base, *counts).returncode == 0
    old = {f: (folder / f).read_bytes() for f in files}
    assert new != old and new["seeds.manifest.json"] != old["seeds.manifest.json"]
    new_args = [*base, *more]
    kills = _kill_at_every_step(new_args, folder, [old, new], files)
    assert kills > 5
    assert {f: (folder / f).read_bytes() for f in files} == new
    _kill_at_every_step([*base, *counts], folder, [old, new], files)  # back again, killed at every step
    _random_kills(new_args, folder, [old, new], files, times=6)


@pytest.mark.slow
def test_kill_between_label_studio_tasks_and_config_leaves_both_old_or_both_new(tmp_path: Path) -> None:
    for k in (4, 5):
        assert fsb("tuples", "20", "--size", str(k), "--appearances", "4", "--out", tmp_path / f"d{k}.csv").returncode == 0
    (tmp_path / "items.csv").write_text("id,text\n" + "".join(f"{i},sentence {i}\n" for i in range(1, 21)))
    ls = tmp_path / "ls"
    files = ["tasks.json", "labeling_config.xml"]

    def export(k: int) -> list[str]:
        return ["annotate", "export", str(tmp_path / f"d{k}.csv"), "--items", str(tmp_path / "items.csv")]

    assert fsb(*export(5), "--format", "label-studio", "--out", tmp_path / "ref").returncode == 0
    new = {f: (tmp_path / "ref" / f).read_bytes() for f in files}
    assert fsb(*export(4), "--format", "label-studio", "--out", ls).returncode == 0
    old = {f: (ls / f).read_bytes() for f in files}
    assert len(json.loads(new["tasks.json"])[0]["data"]) > len(json.loads(old["tasks.json"])[0]["data"])
    kills = _kill_at_every_step([*export(5), "--format", "label-studio", "--out", str(ls)], ls, [old, new], files)
    assert kills > 5
    assert {f: (ls / f).read_bytes() for f in files} == new
    _random_kills([*export(4), "--format", "label-studio", "--out", str(ls)], ls, [old, new], files, times=6)


@pytest.mark.slow
def test_kill_between_generate_output_and_csv_leaves_both_old_or_both_new(tmp_path: Path) -> None:
    """`generate --collect` rewrites OUT.jsonl and the --csv from the journal as one unit."""
    from fsb.data.release import find_local_release

    def setup(folder: Path) -> tuple[list[str], list[str]]:
        folder.mkdir()
        seed_file(folder / "seeds.jsonl")
        ic = ["--ic-dir", str(find_local_release())]
        base = ["generate", "--seeds", str(folder / "seeds.jsonl"), "--model", "m", *ic, "--out", str(folder / "g.jsonl")]
        assert fsb(*base, "--batch-file", folder / "b.jsonl").returncode == 0
        answers = batch_answers(folder / "b.jsonl", folder / "all.jsonl").read_text().splitlines(keepends=True)
        (folder / "half.jsonl").write_text("".join(answers[: len(answers) // 2]))
        half = [*base, "--csv", str(folder / "g.csv"), "--collect", str(folder / "half.jsonl")]
        return half, [*half[:-1], str(folder / "all.jsonl")]

    files = ["g.jsonl", "g.csv"]
    ref_half, ref_all = setup(tmp_path / "ref")
    assert fsb(*ref_half).returncode == 0  # collects half the answers; the rest stay pending
    old = {f: (tmp_path / "ref" / f).read_bytes() for f in files}
    assert fsb(*ref_all).returncode == 0
    new = {f: (tmp_path / "ref" / f).read_bytes() for f in files}
    assert old != new
    half, everything = setup(tmp_path / "run")
    assert fsb(*half).returncode == 0
    assert {f: (tmp_path / "run" / f).read_bytes() for f in files} == old
    kills = _kill_at_every_step(everything, tmp_path / "run", [old, new], files)
    assert kills > 5
    assert {f: (tmp_path / "run" / f).read_bytes() for f in files} == new


def test_no_output_is_written_inside_a_sealed_folder_even_with_force(tmp_path: Path) -> None:
    """The adversarial pass: `annotate llm --dataset ds --batch-file ds/stats.json --force` replaced the input build's
    stats.json (every later reader then failed), and `generate --out ds/gen.jsonl` added files to a sealed build.
    Any output at or below a folder with a seal (a build, an analysis, a report) is refused, --force or not,
    and the folder is left byte for byte."""
    from tests._support import make_raw

    gens, ann = make_raw(tmp_path / "raw")
    built = fsb("build", "--generations", gens, "--annotations", ann, "--out", tmp_path / "ds", "--no-record", "--trials", "2")
    assert built.returncode == 0, built.stderr
    ds = tmp_path / "ds"
    before = {p: p.read_bytes() for p in sorted(ds.rglob("*")) if p.is_file()}
    for target in (ds / "stats.json", ds / "data" / "new.csv", ds / "scores.csv"):
        for force in ((), ("--force",)):
            proc = fsb("score", ann, "--out", target, *force)
            refused(proc, "sealed as", "never writes into a sealed folder")
    assert {p: p.read_bytes() for p in sorted(ds.rglob("*")) if p.is_file()} == before
    ok = fsb("score", ann, "--out", tmp_path / "scores.csv")  # beside it is fine
    assert ok.returncode == 0, ok.stderr

"""Issue 21, "The CLI, finished": one registry for every command (annotate's actions included), commands listed
in workflow order with an exit-status table, descriptions everywhere, --json where a summary is printed, and
only the invoked command's options built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def fsb(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fsb", *map(str, args)], capture_output=True, text=True, check=False)


def test_help_lists_commands_in_workflow_order_and_ends_with_exit_statuses() -> None:
    out = fsb("--help").stdout
    names = ["fetch-release", "build", "seeds", "generate", "tuples", "annotate", "score", "reliability", "analyse", "eval", "publish"]
    where = [out.index(f"\n    {n} ") if f"\n    {n} " in out else out.index(f"\n    {n}\n") for n in names]
    assert where == sorted(where)
    tail = out[out.index("exit status:") :]
    for code in ("0 ", "1 ", "2 ", "130"):
        assert f"\n  {code}" in tail


def test_every_command_and_annotate_action_has_a_description() -> None:
    from fsb.cli import annotate, app

    for c in app._commands():
        assert c.parser_kwargs.get("help"), c.name
    assert {c.name for c in annotate.actions} == {"export", "import"}
    for action in ("export", "import", "llm"):
        proc = fsb("annotate", action, "--help")
        assert proc.returncode == 0 and "exit status" not in proc.stdout.splitlines()[0]


def test_only_the_invoked_commands_options_are_built() -> None:
    from fsb.cli import app

    parser, handlers = app._parser(["score"])
    assert "build" in handlers and "score" in handlers
    sub = next(a for a in parser._actions if a.dest == "command")
    assert any(a.dest == "method" for a in sub.choices["score"]._actions)
    assert not any(a.dest == "raw_dir" for a in sub.choices["build"]._actions)


def test_seeds_and_build_print_json_on_request(tmp_path: Path) -> None:
    from fsb.data.release import find_local_release

    sources = Path("/work/shared/data/seed-sources")
    if sources.is_dir():
        proc = fsb(
            "seeds", "--copa", sources / "balacopa-dev-all.xml", "--stereoset", sources / "editbias_gender_test.json",
            "--out", tmp_path / "s.jsonl", "--explicit", "2", "--implicit", "2", "--neutral", "2", "--random", "2", "--json",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["seeds"] == 8
    release = find_local_release()
    if release is not None:
        proc = fsb("build", "--raw-dir", release, "--out", tmp_path / "ds", "--no-record", "--trials", "2", "--json")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)["stats"]["n_items"] > 0


def test_a_command_started_with_stdout_closed_writes_its_file_or_says_why_in_one_line(tmp_path: Path) -> None:
    """`fsb score j.csv >&-` (Python's sys.stdout is None): with --out the scores are written, exit 0; without,
    one line saying stdout is closed, exit 2 (was two AttributeError tracebacks and exit 120)."""
    import os

    judgments = tmp_path / "j.csv"
    judgments.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\na,b,c,d,a,d\n", encoding="utf-8")

    def closed(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "fsb", *args]
        close_stdout = lambda: os.close(1)  # noqa: E731  (in the child, before Python starts)
        return subprocess.run(command, cwd=tmp_path, stderr=subprocess.PIPE, text=True, preexec_fn=close_stdout, check=False)

    to_file = closed("score", str(judgments), "--out", "s.csv")
    assert to_file.returncode == 0, to_file.stderr
    assert (tmp_path / "s.csv").read_text().startswith("item,score_raw,score,n,best,worst,bound\na,1.000000")
    printed = closed("score", str(judgments))
    assert printed.returncode == 2 and "Traceback" not in printed.stderr, printed.stderr
    assert printed.stderr.strip().splitlines() == [
        "fsb score: error: standard output is closed, and this command prints there: run it with stdout open (e.g. `> file`)"
    ]


JUDGMENTS = "Item1,Item2,Item3,Item4,BestItem,WorstItem\na,b,c,d,a,d\nb,c,d,e,b,e\n"


def _piped(*args: str | Path, data: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fsb", *map(str, args)], input=data, cwd=cwd, capture_output=True, text=True, check=False)


def test_a_dash_is_standard_input_for_the_commands_input_files_and_errors_name_it(tmp_path: Path) -> None:
    """Issue 32: `fsb score -` was "-: file not found". `-` is standard input (fsb score, fsb reliability, fsb
    annotate import ...), read as a file would be, and an error in it names "standard input", never the private
    copy fsb makes of it, which is gone when the command ends."""
    import glob
    import tempfile

    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "fsb-stdin-*")))
    (tmp_path / "j.csv").write_text(JUDGMENTS, encoding="utf-8")
    piped = _piped("score", "-", data=JUDGMENTS, cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == _piped("score", "j.csv", data="", cwd=tmp_path).stdout
    assert _piped("score", "-", "--out", "s.csv", data=JUDGMENTS, cwd=tmp_path).returncode == 0
    assert (tmp_path / "s.csv").read_text(encoding="utf-8") == piped.stdout
    assert _piped("reliability", "-", "--json", data=JUDGMENTS, cwd=tmp_path).returncode == 0
    bad = _piped("score", "-", data=JUDGMENTS + "a,b,c,d,a,x\n", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.splitlines() == [
        "fsb score: error: standard input, line 4, field 'WorstItem': 'x' is not one of the tuple's items ('a', 'b', 'c', 'd')"
    ]
    empty = _piped("score", "-", data="", cwd=tmp_path)
    assert empty.returncode == 2 and empty.stderr.startswith("fsb score: error: standard input: gave no data"), empty.stderr
    (tmp_path / "design.csv").write_text("tuple_id,Item1,Item2,Item3,Item4\n0,a,b,c,d\n", encoding="utf-8")
    answers = "tuple_id,best,worst\n0,a,d\n"
    imported = _piped("annotate", "import", "-", "--tuples", "design.csv", "--out", "j2.csv", data=answers, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert (tmp_path / "j2.csv").read_text(encoding="utf-8").splitlines()[1] == "a,b,c,d,a,d"
    items = "".join(f"{i}\n" for i in range(1, 13))  # fsb tuples and annotate export --items took no `-` (new-user review)
    (tmp_path / "items.txt").write_text(items, encoding="utf-8")
    assert _piped("tuples", "-", "--out", "t1.csv", data=items, cwd=tmp_path).returncode == 0
    assert _piped("tuples", "items.txt", "--out", "t2.csv", data="", cwd=tmp_path).returncode == 0
    assert (tmp_path / "t1.csv").read_bytes() == (tmp_path / "t2.csv").read_bytes()
    texts = "id,text\n" + "".join(f"{i},sentence {i}\n" for i in range(1, 13))
    exported = _piped("annotate", "export", "t1.csv", "--items", "-", "--out", "f.csv", data=texts, cwd=tmp_path)
    assert exported.returncode == 0 and "sentence 1" in (tmp_path / "f.csv").read_text(encoding="utf-8"), exported.stderr
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "fsb-stdin-*"))) == before  # every private copy removed


def test_help_and_version_to_a_full_or_closed_stdout_are_one_line(tmp_path: Path) -> None:
    """`fsb score --help > /dev/full` and `fsb --version >&-` ended in a 30-line traceback, exit 1 (adversarial
    review): one line naming standard output, exit 2, as every command's own output."""
    cases = [
        (["score", "--help"], "full", "fsb score: error: cannot write to standard output"),
        (["--version"], "closed", "fsb: error: standard output is closed"),
    ]
    for args, how, start in cases:
        with open("/dev/full", "w") as full:
            out = full if how == "full" else subprocess.DEVNULL
            command = [sys.executable, "-m", "fsb", *args]
            if how == "closed":
                command = ["sh", "-c", " ".join(f"'{c}'" for c in command) + " >&-"]
            proc = subprocess.run(command, cwd=tmp_path, stdout=out, stderr=subprocess.PIPE, text=True, check=False)
        assert proc.returncode == 2, proc.stderr
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith(start), proc.stderr


def test_a_full_standard_output_is_named_in_its_one_line(tmp_path: Path) -> None:
    """Issue 32: `fsb score j.csv > /dev/full` said only "No space left on device"; the line names standard output."""
    (tmp_path / "j.csv").write_text(JUDGMENTS, encoding="utf-8")
    for args in (["score", "j.csv"], ["reliability", "j.csv"]):
        with open("/dev/full", "w") as full:
            command = [sys.executable, "-m", "fsb", *args]
            proc = subprocess.run(command, cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True, check=False)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.splitlines() == [f"fsb {args[0]}: error: cannot write to standard output: No space left on device"]

"""Issue 20: hostile inputs to the readers of the annotate and generate stages. Each case of the adversarial
pass (a traceback or a silent acceptance) now fails with fsb's one line naming the file; property-based
fuzzing (hypothesis) of the Label Studio export reader, the JSON-lines reader, the answers CSV and the seeds
readers checks that nothing but fsb's own error (FsbError) ever escapes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fsb.annotate.labelstudio import read_export  # noqa: E402
from fsb.core.errors import FsbError  # noqa: E402
from fsb.core.readers import iter_jsonl  # noqa: E402
from fsb.generate.seeds import read_copa, read_seeds, read_stereoset  # noqa: E402


def fsb(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "fsb", *map(str, args)], capture_output=True, text=True, check=False)


def one_line(proc: subprocess.CompletedProcess[str], *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


def _choice(name: str, value: Any) -> dict[str, Any]:
    return {"from_name": name, "to_name": "text1", "type": "choices", "value": value}


def _task(**over: Any) -> dict[str, Any]:
    task = {
        "id": 7,
        "data": {"tuple_id": 0, "item1": 5, "item2": 2, "item3": 9, "item4": 1},
        "annotations": [
            {"id": 1, "completed_by": 3, "result": [_choice("best", {"choices": ["1"]}), _choice("worst", {"choices": ["2"]})]}
        ],
    }
    task.update(over)
    return task


HOSTILE_EXPORTS = {
    "annotations an int": ([_task(annotations=5)], "'annotations' is int"),
    "annotations a dict": ([_task(annotations={"id": 1})], "'annotations' is dict"),
    "an annotation an int": ([_task(annotations=[3])], "an annotation is '3'"),
    "result value a string": ([_task(annotations=[{"id": 1, "result": [_choice("best", "1")]}])], "has no list of choices"),
    "result a string": ([_task(annotations=[{"id": 1, "result": "best=1"}])], "'result' is str"),
    "task id abc": ([_task(id="abc")], "its id 'abc' is not an integer"),
    "task id null": ([_task(id=None)], "its id 'None' is not an integer"),
    "choice superscript two": (
        [_task(annotations=[{"id": 1, "result": [_choice("best", {"choices": ["²"]}), _choice("worst", {"choices": ["1"]})]}])],
        "is not a position 1..4",
    ),
    "an item a dict": ([_task(data={"tuple_id": 0, "item1": {"id": 5}, "item2": 2, "item3": 9, "item4": 1})], "item1 is"),
    "an item empty": ([_task(data={"tuple_id": 0, "item1": "", "item2": 2, "item3": 9, "item4": 1})], "not an item id"),
    "an item repeated": ([_task(data={"tuple_id": 0, "item1": 2, "item2": 2, "item3": 9, "item4": 1})], "appears twice in one tuple"),
}


@pytest.mark.parametrize("case", list(HOSTILE_EXPORTS))
def test_a_hostile_label_studio_export_is_one_line_never_a_traceback_nor_written(tmp_path: Path, case: str) -> None:
    """Import without --tuples (nothing to check the items against): before, dicts, empties and repeated
    items were written as judgments, and the other cases were tracebacks."""
    export, words = HOSTILE_EXPORTS[case]
    src = tmp_path / "export.json"
    src.write_text(json.dumps(export))
    out = tmp_path / "judgments.csv"
    one_line(fsb("annotate", "import", src, "--format", "label-studio", "--out", out), str(src), words)
    assert not out.exists()


def test_a_deeply_nested_json_file_is_one_line(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    one_line(fsb("annotate", "import", deep, "--format", "label-studio", "--out", tmp_path / "j.csv"), str(deep), "nested too deeply")
    one_line(fsb("seeds", "--stereoset", deep, "--out", tmp_path / "s.jsonl"), str(deep), "nested too deeply")


def test_a_pipe_input_is_read_not_called_an_empty_file(tmp_path: Path) -> None:
    """`fsb score <(cat j.csv)`: a pipe is read once and its bytes kept; it is never 'file is empty'."""
    j = tmp_path / "j.csv"
    j.write_text("Item1,Item2,Item3,Item4,BestItem,WorstItem\n1,2,3,4,1,4\n2,3,4,5,2,5\n")
    proc = subprocess.run(["bash", "-c", f"{sys.executable} -m fsb score <(cat {j})"], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("item,score")
    empty = subprocess.run(["bash", "-c", f"{sys.executable} -m fsb score <(true)"], capture_output=True, text=True, check=False)
    one_line(empty, "a pipe or device that gave no data")
    assert "file is empty" not in empty.stderr


def test_engine_options_refuse_absurd_counts(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps({"seed": "The vase broke.", "seed_type": "neutral", "source": "t", "source_id": "1"}) + "\n")
    proc = fsb("generate", "--seeds", seeds, "--out", tmp_path / "g.jsonl", "--model", "m", "--concurrency", "100000000", "--dry-run")
    assert proc.returncode == 2 and "at most 256 requests in flight" in proc.stderr
    proc = fsb("explain", "--out", tmp_path / "e.jsonl", "--model", "m", "--per-bin", "0", "--dry-run")
    assert proc.returncode == 2 and "--per-bin" in proc.stderr
    proc = fsb("explain", "--out", tmp_path / "e.txt", "--model", "m", "--dry-run")  # the hint is explain's, not build's
    one_line(proc, "e.txt", "must be a .jsonl file")
    assert "fsb build" not in proc.stderr


# --- fuzzing: only fsb's own error escapes ----------------------------------------------------------------------

KEYS = ["annotations", "data", "id", "value", "choices", "result", "from_name", "sentences", "bias_type"]
JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(allow_nan=True), st.text(max_size=4)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(
            st.sampled_from(KEYS),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)


def _mutated_tasks(draw: Any) -> Any:
    tasks = [_task(id=i, data={"tuple_id": i, "item1": 1, "item2": 2, "item3": 3, "item4": 4}) for i in range(3)]
    for _ in range(draw(st.integers(0, 4))):
        t = tasks[draw(st.integers(0, 2))]
        where = draw(st.sampled_from(["id", "data", "annotations", "item", "result", "choice", "completed_by"]))
        value = draw(JSONISH)
        if where in ("id", "data", "annotations"):
            t[where] = value
        elif where == "item" and isinstance(t.get("data"), dict):
            t["data"][f"item{draw(st.integers(1, 4))}"] = value
        elif where in ("result", "choice", "completed_by") and isinstance(t.get("annotations"), list) and t["annotations"]:
            ann = t["annotations"][0]
            if isinstance(ann, dict):
                if where == "result":
                    ann["result"] = value
                elif where == "completed_by":
                    ann["completed_by"] = value
                elif isinstance(ann.get("result"), list) and ann["result"]:
                    ann["result"][0] = _choice("best", {"choices": [value]})
    return tasks


@st.composite
def label_studio_exports(draw: Any) -> bytes:
    if draw(st.booleans()):
        return json.dumps(draw(JSONISH)).encode()
    return json.dumps(_mutated_tasks(draw)).encode()


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(data=label_studio_exports())
def test_fuzzed_label_studio_exports_raise_only_fsb_errors(tmp_path: Path, data: bytes) -> None:
    src = tmp_path / "export.json"
    src.write_bytes(data)
    with contextlib.suppress(FsbError):
        read_export(src)


@SETTINGS
@given(data=st.binary(max_size=200) | st.lists(JSONISH.map(json.dumps), max_size=4).map(lambda xs: "\n".join(xs).encode()))
def test_fuzzed_json_lines_raise_only_fsb_errors(tmp_path: Path, data: bytes) -> None:
    src = tmp_path / "x.jsonl"
    src.write_bytes(data)
    with contextlib.suppress(FsbError):
        list(iter_jsonl(src))
    with contextlib.suppress(FsbError):
        read_seeds([str(src)])
    with contextlib.suppress(FsbError):
        read_copa(src)


@SETTINGS
@given(doc=JSONISH)
def test_fuzzed_stereoset_files_raise_only_fsb_errors(tmp_path: Path, doc: Any) -> None:
    src = tmp_path / "stereoset.json"
    src.write_text(json.dumps({"data": {"intrasentence": doc}} if isinstance(doc, list) else doc))
    with contextlib.suppress(FsbError):
        read_stereoset(src)


CSV_CELLS = st.one_of(st.sampled_from(["", "0", "1", "2", "-1", "1.5", "²", "٣", "9" * 25, '"', "a,b", "x\ny", "NA"]), st.text(max_size=5))


@SETTINGS
@given(rows=st.lists(st.lists(CSV_CELLS, min_size=0, max_size=5), max_size=6), header=st.sampled_from(["tuple_id,best,worst", "", "a"]))
def test_fuzzed_answers_csv_raise_only_fsb_errors(tmp_path: Path, rows: list[list[str]], header: str) -> None:
    from fsb.annotate.forms import import_judgments
    from fsb.bws.tuples import make_tuples

    design = tmp_path / "design.csv"
    if not design.exists():
        make_tuples(items=8, out=design, tuple_size=4, appearances=4, seed=0, force=True)
    answers = tmp_path / "answers.csv"
    answers.write_text(header + "\n" + "".join(",".join(r) + "\n" for r in rows))
    with contextlib.suppress(FsbError):
        import_judgments(responses_csv=answers, design_csv=design, out=tmp_path / "j.csv", force=True)


def test_an_annotation_without_an_id_is_named_by_its_task_and_place(tmp_path: Path) -> None:
    """Issue 32: an annotation with no id was "annotation None" in the error; it is named by its task and its
    place in the task's annotations, and a repeated judgment names the earlier one the same way."""
    first = {"completed_by": 3, "result": [_choice("best", {"choices": ["1"]}), _choice("worst", {"choices": ["2"]})]}
    same = {"completed_by": 4, "result": [_choice("best", {"choices": ["2"]}), _choice("worst", {"choices": ["2"]})]}
    src = tmp_path / "export.json"
    src.write_text(json.dumps([_task(annotations=[first, same])]))
    with pytest.raises(FsbError) as got:
        read_export(src)
    assert "task 7, annotation #2 without an id: best and worst are the same text" in str(got.value)
    assert "None" not in str(got.value)
    src.write_text(json.dumps([_task(annotations=[first, dict(first)])]))
    with pytest.raises(FsbError) as got:
        read_export(src)
    assert "task 7, annotation #2 without an id: annotator '3' already judged tuple 0 (annotation #1 without an id)" in str(got.value)

"""Reading lm-eval runs and prediction files (fsb.evaluate.results, fsb.evaluate.runfiles): a damaged or
foreign file is one line naming file, line and field, exit 2 (issue 20), and fuzzing the reader lets only
fsb's own errors escape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fsb.cli.app import main
from fsb.core.errors import FsbError
from fsb.evaluate.results import entries_from_run, load_run, read_predictions

STAMP = "2026-01-01T00-00-00"


def _run(folder: Path, results: Any, samples: dict[str, str] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{STAMP}.json"
    path.write_text(results if isinstance(results, str) else json.dumps(results), encoding="utf-8")
    for task, text in (samples or {}).items():
        (folder / f"samples_{task}_{STAMP}.jsonl").write_text(text, encoding="utf-8")
    return path


def _report(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["report", *args])
    return code, capsys.readouterr().err


GOOD_CFG = {"config": {"model": "dummy", "model_args": ""}, "results": {"fsb_0shot": {}}}


@pytest.mark.parametrize(
    ("results", "samples", "message"),
    [
        ([{"configs": {}}], {}, "the top level is a JSON list, not an object"),
        ({"configs": 5}, {}, "'configs' is 5, not an object of task configs"),
        (
            {"configs": {"fsb_0shot": {}}, **GOOD_CFG},
            {"fsb_0shot": json.dumps({"doc": {"id": "abc"}, "pearson": [0.5, 0.4]}) + "\n"},
            "line 1, field 'doc.id': sentence id 'abc' is not a whole number",
        ),
        (
            {"configs": {"fsb_0shot": {}}, **GOOD_CFG},
            {"fsb_0shot": json.dumps({"doc": {"id": 3}, "pearson": ["x", 0.4]}) + "\n"},
            "not [prediction or null, gold score]",
        ),
        ({"configs": {"../../etc": {}}}, {}, "is not a plain name"),
        ({"configs": {}, "config": {"limit": "ten"}}, {}, "'config.limit' is 'ten', not a number"),
        ({"configs": {}, "group_subtasks": {"fsb": 3}}, {}, "'group_subtasks' is not an object of task-name lists"),
    ],
)
def test_fsb_report_refuses_a_damaged_run_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], results: Any, samples: dict[str, str], message: str
) -> None:
    path = _run(tmp_path / "run", results, samples)
    code, err = _report([str(path), "--dataset", str(tmp_path / "nodata")], capsys)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_a_non_numeric_sample_id_through_the_console_script(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _run(
        tmp_path / "run",
        {"configs": {"fsb_0shot": {}}, **GOOD_CFG},
        {"fsb_0shot": json.dumps({"doc": {"id": "x1"}, "pearson": [0.5, 0.4]}) + "\n"},
    )
    fsb = str(Path(sys.executable).parent / "fsb")
    proc = subprocess.run([fsb, "report", str(path)], capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert f"samples_fsb_0shot_{STAMP}.jsonl" in proc.stderr and "doc.id" in proc.stderr


def test_a_string_of_digits_is_still_an_id(tmp_path: Path) -> None:
    lines = "".join(json.dumps({"doc": {"id": i}, "pearson": [0.1 * k, 0.1 * k]}) + "\n" for k, i in enumerate(["7", 3, " 12"], 1))
    run = load_run(_run(tmp_path / "run", {"configs": {"fsb_0shot": {}}, **GOOD_CFG}, {"fsb_0shot": lines}))
    assert run.tasks["fsb_0shot"].ids.tolist() == [3, 7, 12]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("id,score\n1,0.5\nid,score\n2,0.4\n", "line 3: the header again: two prediction files joined into one?"),
        ("id,score,score\n1,0.5,0.7\n", "line 1, field 'score': the header names 'score' twice"),
    ],
)
def test_report_predictions_refuses_a_repeated_header(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "preds.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FsbError, match=message):
        read_predictions(path)


# --- fuzzing: only fsb's own errors escape the reader ---------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
record = st.fixed_dictionaries(
    {
        "tuple_id": json_values,
        "items": st.lists(st.integers(0, 5), max_size=4) | json_values,
        "scores": st.lists(st.floats(0, 1), max_size=4) | json_values,
        "majority_best": st.lists(st.integers(0, 5), max_size=2) | json_values,
        "majority_worst": st.lists(st.integers(0, 5), max_size=2) | json_values,
        "shown": st.lists(
            st.fixed_dictionaries(
                {k: st.none() | st.integers(-1, 5) | json_values for k in ("shift", "best", "worst", "best_item", "worst_item")}
            ),
            max_size=2,
        )
        | json_values,
    }
)
sample = st.fixed_dictionaries(
    {},
    optional={
        "doc": st.fixed_dictionaries({}, optional={"id": json_values | st.integers(0, 9), "seed_type": json_values}) | json_values,
        "pearson": st.tuples(st.none() | st.floats(0, 1) | json_values, st.floats(0, 1) | json_values).map(list) | record | json_values,
    },
)
results_file = (
    st.fixed_dictionaries(
        {},
        optional={
            "configs": st.dictionaries(st.sampled_from(["fsb_0shot", "fsb_bws", "a/b"]), st.dictionaries(st.just("metadata"), json_values))
            | json_values,
            "config": st.fixed_dictionaries({}, optional={"limit": json_values, "model_args": json_values}) | json_values,
            "group_subtasks": st.dictionaries(st.just("fsb"), st.lists(st.sampled_from(["fsb_0shot", "fsb_bws"]))) | json_values,
            "results": json_values,
        },
    )
    | json_values
)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(results=results_file, lines=st.lists(sample, max_size=4), raw=st.sampled_from(["", "{", "[]\n", "\ufeff{}"]))
def test_fuzzed_runs_raise_only_fsb_errors(tmp_path: Path, results: Any, lines: list[Any], raw: str) -> None:
    text = "".join(json.dumps(x) + "\n" for x in lines) + raw
    path = _run(tmp_path / "fuzz", results, {"fsb_0shot": text, "fsb_bws": text})
    try:
        for entry in entries_from_run(load_run(path)):
            assert entry.sets and entry.label
    except FsbError:
        pass


def _per_bin_run(folder: Path, table: Any, per_bin: int | None) -> Path:
    """An lm-eval run over 4 scored sentences with the dataset's gold scores, as `--per-bin 1` (or a plain
    sample of 4) records it in the task's metadata."""
    ids = table.ids[table.scored][:4]
    golds = table.scores[table.scored][:4]
    meta = {"fsb_per_bin": per_bin} if per_bin is not None else {"fsb_sample": 4}
    lines = [json.dumps({"doc": {"id": int(i)}, "pearson": [0.5 + 0.1 * k, float(g)]}) for k, (i, g) in enumerate(zip(ids, golds))]
    results = {"configs": {"fsb_0shot": {"metadata": meta}}, **GOOD_CFG}
    return _run(folder, results, {"fsb_0shot": "\n".join(lines) + "\n"})


def test_a_per_bin_run_is_flagged_stratified_even_on_the_dataset_itself(
    release_dataset: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 18: a --per-bin row on the very dataset it sampled is a stratified sample (flag B), not only a
    small one; a simple random sample of the same size is S only."""
    from fsb.evaluate.reportmd import row_flags
    from fsb.evaluate.results import dataset_table

    table = dataset_table(str(release_dataset))
    _per_bin_run(tmp_path / "strat", table, 1)
    _per_bin_run(tmp_path / "plain", table, None)
    (strat,) = entries_from_run(load_run(tmp_path / "strat"), table)
    (plain,) = entries_from_run(load_run(tmp_path / "plain"), table)
    assert strat.matched and plain.matched, "both score the dataset's own sentences with its gold scores"
    assert "sample: stratified, 1 per bin (inflates correlations)" in strat.flags
    assert not any("stratified" in f for f in plain.flags)
    assert row_flags({"flags": strat.flags, "variants": 1}) == ["B"]
    assert row_flags({"flags": plain.flags, "variants": 1}) == ["S"]
    code = main(["report", str(tmp_path / "strat"), "--dataset", str(release_dataset), "--bootstrap", "20"])
    out = capsys.readouterr().out
    assert code == 0
    (line,) = [ln for ln in out.splitlines() if "dummy" in ln and ln.startswith("|")]
    assert line.rstrip().rstrip("|").split("|")[-1].strip() == "B", line


@pytest.mark.parametrize("bad", ["+7", "007", "1_000", "-1", " 7 7", "7.0", "x"])
@pytest.mark.parametrize("form", ["csv", "jsonl"])
def test_report_predictions_follow_the_one_id_rule(tmp_path: Path, bad: str, form: str) -> None:
    """int() takes "+7", "007" and "1_000"; the one id rule (every other reader's) refuses them, on the
    first bad line, naming the file, the line and the field."""
    if form == "csv":  # the header is line 1
        path = tmp_path / "preds.csv"
        path.write_text(f"id,score\n1,0.5\n2,0.5\n{bad},0.4\n", encoding="utf-8")
    else:
        path = tmp_path / "preds.jsonl"
        lines = [json.dumps({"id": i, "score": 0.5}) for i in (1, 2)] + [json.dumps({"id": bad, "score": 0.4})]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(FsbError) as e:
        read_predictions(path)
    message = str(e.value)
    line = 4 if form == "csv" else 3
    assert str(path) in message and f"line {line}, field 'id'" in message and "\n" not in message


@pytest.mark.parametrize("bad", [True, 7.0, -3, [7], None])
def test_report_predictions_refuse_json_ids_that_are_not_ids(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"id": bad, "score": 0.4}) + "\n", encoding="utf-8")
    with pytest.raises(FsbError, match=r"line 1, field 'id'"):
        read_predictions(path)


def test_report_predictions_take_canonical_ids(tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"id": 7, "score": 0.5}) + "\n" + json.dumps({"id": " 0 ", "score": 0.25}) + "\n", encoding="utf-8")
    assert read_predictions(path) == {7: 0.5, 0: 0.25}
    csv_path = tmp_path / "preds.csv"
    csv_path.write_text("score,id\n0.5, 12\n", encoding="utf-8")
    assert read_predictions(csv_path) == {12: 0.5}


def test_a_dataset_whose_stats_json_is_not_json_or_too_small_is_one_line(tmp_path: Path) -> None:
    """The adversarial pass: a build's stats.json with extra data after the object made `fsb baseline` and
    `fsb report --dataset` end in a JSONDecodeError traceback; a dataset too small for the protocol's
    few-shot sets ended in a ValueError traceback. Both are one line, exit 2."""
    from tests._support import make_raw, run_fsb

    for n, edit in ((12, False), (160, True)):
        gens, ann = make_raw(tmp_path / f"raw{n}", n=n)
        ds = tmp_path / f"ds{n}"
        built = run_fsb("build", "--generations", str(gens), "--annotations", str(ann), "--out", str(ds), "--no-record", "--trials", "2")
        assert built.returncode == 0, built.stderr
        if edit:
            (ds / "stats.json").write_text((ds / "stats.json").read_text() + '\n{"x": 1}\n')
        for args in (("baseline", "mean", "--dataset", str(ds), "--out", str(tmp_path / f"b{n}.csv")),):
            proc = run_fsb(*args)
            assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
            assert ("stats.json: not the JSON fsb build writes" if edit else "not a dataset the fsb tasks can use") in proc.stderr

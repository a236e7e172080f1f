"""The study file (fsb.annotate.study): what annotators were asked, read strictly."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("question: A?\nquestion: B?\n", ("line 2", "'question' is given twice")),
        ("best_label: Most\nworst_label: most\n", ("field 'worst_label'", "the same")),
    ],
)
def test_a_study_file_with_a_repeated_key_or_one_label_twice_is_refused(tmp_path: Path, text: str, words: tuple[str, ...]) -> None:
    """The adversarial pass: `annotate export --study` accepted a study file giving `question` twice (the last
    won silently) and one whose best and worst labels were the same."""
    from fsb.annotate.study import read_study
    from fsb.core.errors import FsbError

    path = tmp_path / "study.yaml"
    path.write_text(text)
    with pytest.raises(FsbError) as err:
        read_study(path)
    assert all(w in str(err.value) for w in words), str(err.value)

"""`fsb generate --batch-file` in process: the batch file is the data; the "wrote N requests" line is
commentary, on stderr, so that stdout stays clean for a pipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import fifty_shades_of_bias as spec
from fsb.cli.app import main


def test_batch_file_commentary_is_on_stderr(tmp_path: Path, release: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seeds = tmp_path / "seeds.jsonl"
    rows = [
        {"seed": f"The {st} seed number {i}.", "seed_type": st, "source": "test", "source_id": str(i)}
        for st in spec.SEED_TYPES
        for i in range(2)
    ]
    seeds.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    batch = tmp_path / "batch.jsonl"
    argv = ["generate", "--seeds", str(seeds), "--out", str(tmp_path / "g.jsonl"), "--model", "gpt-4o-mini", "--batch-file", str(batch)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "requests for the Batch API -> " in captured.err and str(batch) in captured.err
    assert len(batch.read_text(encoding="utf-8").splitlines()) == 16

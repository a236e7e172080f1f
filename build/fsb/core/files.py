"""File plumbing shared by every stage, under its historical name: this module re-exports the readers
(`fsb.core.readers`), the atomic writes (`fsb.core.atomic`), the folder swaps (`fsb.core.folders`) and the seals and records
(`fsb.core.seals`), so code that calls `fsb.core.files.X` keeps working. New code declares its outputs to
the output layer, `fsb.core.output`, which decides and writes."""

from __future__ import annotations

from fsb.core.atomic import (
    atomic_write,
    check_replaceable_file,
    first_line_matches,
    give_ordinary_modes,
    is_special,
    sweep_stale_temporaries,
    write_file,
)
from fsb.core.folders import atomic_dir, check_replaceable_dir, sweep_stale_stages
from fsb.core.readers import (
    SHOWN_CHARS,
    InputError,
    content_fingerprint,
    iter_jsonl,
    quoted,
    read_input_bytes,
    read_utf8,
    read_word_list,
    sha256_file,
    short,
)
from fsb.core.seals import (
    FILES_RECORD,
    SEAL_FILE,
    check_recorded_file,
    file_difference,
    list_tree,
    read_seal,
    record_digests,
    recorded_kind,
    recorded_write,
    seal_difference,
    write_seal,
)

__all__ = [
    "FILES_RECORD",
    "SEAL_FILE",
    "SHOWN_CHARS",
    "InputError",
    "atomic_dir",
    "atomic_write",
    "check_recorded_file",
    "check_replaceable_dir",
    "check_replaceable_file",
    "content_fingerprint",
    "file_difference",
    "first_line_matches",
    "give_ordinary_modes",
    "is_special",
    "iter_jsonl",
    "list_tree",
    "quoted",
    "read_input_bytes",
    "read_seal",
    "read_utf8",
    "read_word_list",
    "record_digests",
    "recorded_kind",
    "recorded_write",
    "seal_difference",
    "sha256_file",
    "short",
    "sweep_stale_stages",
    "sweep_stale_temporaries",
    "write_file",
    "write_seal",
]

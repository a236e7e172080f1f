"""Raw files -> validated tables, the public face of the readers: the generations (FSB_text.csv or a
`fsb generate` JSONL file), the individual best-worst judgments (`Item1..ItemK,BestItem,WorstItem
[,Annotator]`, read by `fsb.core.judgments`), any CSV with line numbers, and the one id rule (`id_problem`).

Every refusal is an `InputError` naming the file, the line (header = line 1) and the field, and it is
always the FIRST offending line of the file, whatever the column or the kind of check. The code lives in
`fsb.core.csvrows` (records, the id rule, generations) and `fsb.core.judgments`; this module re-exports it.
"""

from __future__ import annotations

from fsb.core.csvrows import (
    FAST_READER_BYTES,
    GENERATION_COLUMNS,
    INT32_MAX,
    INT64_MAX,
    INVALID_POLICIES,
    Generations,
    Invalid,
    Rows,
    Table,
    arrow_to_numpy,
    canonical_id,
    check_header,
    column_name,
    first_true,
    has_leading_zero,
    id_problem,
    numpy_to_arrow,
    parse_rows,
    read_csv_table,
    read_generations,
    record_lines,
    require_columns,
    require_header,
    show_label,
)
from fsb.core.files import short as _short  # noqa: F401  (imported from here by fsb.data.dataset)
from fsb.core.judgments import (
    IRREGULAR_KINDS,
    Annotations,
    check_coverage,
    describe_irregular,
    peek_header,
    read_annotations,
    refuse_unknown_ids,
)

_first = first_true  # old private names, still imported by fsb.data.dataset
_show = show_label

__all__ = [
    "FAST_READER_BYTES",
    "GENERATION_COLUMNS",
    "INT32_MAX",
    "INT64_MAX",
    "INVALID_POLICIES",
    "IRREGULAR_KINDS",
    "Annotations",
    "Generations",
    "Invalid",
    "Rows",
    "Table",
    "arrow_to_numpy",
    "canonical_id",
    "check_coverage",
    "check_header",
    "column_name",
    "describe_irregular",
    "first_true",
    "has_leading_zero",
    "id_problem",
    "numpy_to_arrow",
    "parse_rows",
    "peek_header",
    "read_annotations",
    "read_csv_table",
    "read_generations",
    "record_lines",
    "refuse_unknown_ids",
    "require_columns",
    "require_header",
    "show_label",
]

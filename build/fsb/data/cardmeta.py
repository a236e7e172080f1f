"""A dataset card's metadata (the YAML block of README.md), read one way for every command that needs it
(`fsb analyse` finds the data files, `fsb publish` checks a build and a Hub revision): huggingface_hub's
card parser and datasets' own metadata classes, so fsb reads a card as the Hub and `load_dataset` do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fsb.core.readers import InputError, read_utf8

__all__ = ["CardMeta", "parse_card", "read_card"]


@dataclass(frozen=True)
class CardMeta:
    """The card's configs (name -> entry without `config_name`: data_files, ...) and dataset_info per config."""

    path: Path
    configs: dict[str, dict[str, Any]]
    infos: dict[str, Any]

    def data_files(self, config: str, split: str | None = None) -> list[Any]:
        """The paths or patterns that `config`'s data_files lists (of `split` only, if given), flattened from
        the forms the card format allows: a string, a list of strings, a list of {split, path} entries."""
        if config not in self.configs:
            raise InputError(self.path, f"the card's YAML has no {config!r} config", field="configs")
        entries = self.configs[config].get("data_files")
        if entries is None:
            return []
        out: list[Any] = []
        for entry in entries if isinstance(entries, list) else [entries]:
            if isinstance(entry, dict):
                if split is not None and entry.get("split", split) != split:
                    continue
                entry = entry.get("path")
            out += entry if isinstance(entry, list) else [entry]
        return out

    def num_examples(self, config: str) -> int | None:
        """The rows `config` holds by the card's dataset_info (all splits), or None if it does not say."""
        info = self.infos.get(config)
        splits = getattr(info, "splits", None) or {}
        return sum(s.num_examples for s in splits.values()) if splits else None


def parse_card(text: str, where: str | os.PathLike[str]) -> CardMeta:
    """Parse a card's text; `where` names it in errors. Refuses text without a YAML block at the top and a
    block that the Hub's parsers refuse, with one line."""
    from datasets.info import DatasetInfosDict
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    if not text.startswith("---"):
        raise InputError(where, "not a dataset card: no YAML block between '---' lines at the top")
    try:
        card = DatasetCard(text)
        configs = MetadataConfigs.from_dataset_card_data(card.data)
        infos = DatasetInfosDict.from_dataset_card_data(card.data)
    except Exception as e:  # any parse error of the card is bad input, reported on one line
        raise InputError(where, f"the dataset card does not parse: {' '.join(str(e).split())[:300]}") from None
    return CardMeta(Path(where), dict(configs), dict(infos))


def read_card(path: str | os.PathLike[str]) -> CardMeta:
    """Read and parse the card at `path` (a README.md)."""
    return parse_card(read_utf8(path), path)

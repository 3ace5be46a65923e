# The two commands: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# demo needs the package; tests add the test and ray extras on top.
RUN_STAMP  := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# timm imports torchvision, whose wheels load only beside the CUDA build of torch: a venv of its own (DEVELOPERS.md).
TIMM_VENV  := .venv-timm
TIMM_STAMP := $(TIMM_VENV)/.installed
# make wheel: the release artifacts in dist/, installed into a venv of their own and run from outside the clone
WHEEL_VENV := .venv-wheel
WHEEL_RUN  := $(abspath $(WHEEL_VENV))/try

.PHONY: demo docs test test-slow test-timm bench lint install clean reproduce-full reproduce-spec-size wheel site-figures

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-compile --upgrade pip
	# The CPU build of torch: from PyTorch's CPU index when it answers within 3 s, else the pinned version (a
	# local CPU wheel here); never PyPI's multi-GB CUDA build. It prints the build it installed.
	# --no-compile: precompiling all of torch costs a minute; warm_bytecode.py compiles what a run imports (~10 s),
	# which Python would otherwise compile again in every process where writing bytecode is off.
	$(BIN)/python tools/install_torch.py
	$(BIN)/pip install --quiet --no-compile -e .
	$(BIN)/python tools/warm_bytecode.py
	touch $@

$(TEST_STAMP): $(RUN_STAMP)
	$(BIN)/pip install --quiet --no-compile -e '.[test,ray]'
	$(BIN)/python tools/warm_bytecode.py --test
	touch $@

install: $(TEST_STAMP)

demo: $(RUN_STAMP)
	@# The report is written even when a check fails; say where it is, then pass on the exit status.
	@$(BIN)/attnlab reproduce --quick --executor pool --out report; status=$$?; \
	echo "figures, tables and checks: report/index.html (one folder per experiment under report/runs/)"; \
	echo "experiments finished before by the same code, config and library versions were reused (each line says so);"; \
	echo "to compute every one again: $(BIN)/attnlab reproduce --quick --executor pool --out report --fresh"; \
	exit $$status

# The full-size reproduction: every experiment at its default (non-quick) settings, two workers; every theory check
# must pass. Budget: 20 minutes on 2 free cores; measured 9 min 8 s, 183/186 theorem checks (docs/timings.md).
reproduce-full: $(RUN_STAMP)
	$(BIN)/attnlab reproduce --paper all --executor pool --workers 2 --out report-full --no-progress

# The diffusion experiment on the spec's own n x m grid (n up to 4096, m up to 8192): hours on 2 CPU cores, sized
# for a long run or a big machine; kept out of reproduce-full.
reproduce-spec-size: $(RUN_STAMP)
	$(BIN)/attnlab run diffusion.gmm --set spec_size=true --out report-full/diffusion-gmm-spec-size --no-progress

# The documentation site (mkdocs.yml) into site/, offline; --strict: a warning (a broken link or reference) fails.
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2 says nothing about this site. The notebook pages are executed
# (a minute); .cache/mkdocs-jupyter keeps them until a notebook changes: delete it after changing the library.
docs: $(TEST_STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet
	@echo "the site: open site/index.html in a browser, from disk (search works there too)"

# Each experiment's figures on the site: a quick reproduction into report-quick/ (a failing check is reported, and
# the figures are still taken), then its PNGs into docs/experiments/figures/<experiment>/ and docs/gallery.md.
site-figures: $(RUN_STAMP)
	-$(BIN)/attnlab reproduce --quick --executor pool --out report-quick --no-progress
	$(BIN)/python tools/docs/site_figures.py report-quick

# The wheel and the sdist (python -m build) into dist/, then the wheel alone in a fresh venv (the CPU torch first, as
# make demo installs it), run from a folder outside the clone: --version, --help, list and one quick experiment.
wheel: $(TEST_STAMP)
	rm -rf dist $(WHEEL_VENV)
	$(BIN)/python -m build --outdir dist . > /dev/null
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/pip install --quiet --no-compile --upgrade pip
	$(WHEEL_VENV)/bin/python tools/install_torch.py
	$(WHEEL_VENV)/bin/pip install --quiet --no-compile dist/attnlab-*-py3-none-any.whl
	mkdir -p $(WHEEL_RUN)
	cd $(WHEEL_RUN) && ../bin/attnlab --version | grep -qx "attnlab, version $$(ls ../../dist/*.whl | sed 's/.*attnlab-\(.*\)-py3.*/\1/')"
	cd $(WHEEL_RUN) && ../bin/attnlab --help > /dev/null && ../bin/attnlab list > /dev/null
	cd $(WHEEL_RUN) && OMP_NUM_THREADS=1 ../bin/attnlab run implicit-bias.fig2 --quick --no-progress --out fig2
	cd $(WHEEL_RUN) && ../bin/python -c 'import attnlab, sys; sys.exit("site-packages" not in attnlab.__file__)'
	@ls dist

test: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet
	$(BIN)/python -m pytest -m "not slow and not timm" -q

test-slow: $(TEST_STAMP)
	$(BIN)/python -m pytest -m "slow and not timm" -q

$(TIMM_STAMP): pyproject.toml
	$(PYTHON) -m venv $(TIMM_VENV)
	$(TIMM_VENV)/bin/pip install --quiet --no-compile torch==2.14.1 torchvision==0.29.1 timm==1.0.29
	$(TIMM_VENV)/bin/pip install --quiet --no-compile -e '.[test]'
	touch $@

test-timm: $(TIMM_STAMP)
	$(TIMM_VENV)/bin/python -m pytest -m timm -q tests/nets/test_timm.py

# ruff (in the test extra) with the rules of pyproject.toml [tool.ruff]: lint, then the formatter as a check;
# `make test` runs the same two commands first.
lint: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(TIMM_VENV) $(WHEEL_VENV) runs report report-quick report-full site dist .cache .pytest_cache

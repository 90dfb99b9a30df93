# The two commands of the README:
#   make demo   installs what kvgate needs and runs every gate on the embedded default
#   make test   installs what the tests need and runs kvgate's own test suite
#   make check  the same suite without the real engines' end-to-end runs (minutes, not 20)
#   make sweep  a short working-set sweep on the embedded default (where the candidate pays)
#   make docs   the user guide (docs/) as a site in build/site
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo sweep test check bench mutants tools browser faultfs netns engine docs clean

# The demo installs what kvgate needs; the test extras (hypothesis, ruff, xdist …) only come
# with `make test`, so the demo's ten minutes are not spent unpacking them.
$(BIN)/kvgate: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[llamacpp]'
	touch $@

$(VENV)/.test-extras: $(BIN)/kvgate pyproject.toml
	$(BIN)/pip install -q -e '.[test,llamacpp]'
	touch $@

# fio (the G1 instrument), xfsprogs (XFS checks, loop-device tests) and iproute2 (`ip netns`:
# the tests' fio client hosts, tests/_netns.py). Installed with apt-get when we are root on
# Debian/Ubuntu; otherwise the command to run is printed.
tools:
	@missing=""; \
	command -v fio >/dev/null || missing="$$missing fio"; \
	command -v mkfs.xfs >/dev/null || missing="$$missing xfsprogs"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else echo "kvgate needs:$$missing — install with: sudo apt-get install$$missing" >&2; \
	    exit 2; fi; \
	fi

# iproute2 (ip netns, veth) for the network-namespace fio hosts of the multi-host G1 tests
# (tests/_netns.py): the tests' need, not the demo's. Installed with apt-get when we are root.
netns:
	@command -v ip >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iproute2; \
	  else echo "the multi-host G1 tests need iproute2: sudo apt-get install iproute2" >&2; fi; }

# Chromium renders the reports headless and prints them to PDF in the browser test; without
# it that test is skipped with the reason. Installed with apt-get when we are root.
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else echo "the browser test needs chromium: sudo apt-get install chromium" >&2; fi; }

# fuse3 (libfuse3 and fusermount3) for the fault filesystem the tests mount under the gates
# (tests/faultfs/, with mfusepy from the test extras); without it those tests are skipped, with
# the reason. Installed with apt-get when we are root.
faultfs:
	@command -v fusermount3 >/dev/null || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q fuse3; \
	  else echo "the fault-injection tests need fuse3: sudo apt-get install fuse3" >&2; fi; }

# Real inference engines for G2/G3, each with a tiny random-weight model, into ~/.cache/kvgate/
# ($$KVGATE_CACHE moves it), instant when cached: llama.cpp's llama-server built from the
# llama-cpp-python sdist on PyPI (3-4 minutes on 2 cores, CPU-bound) and vLLM's CPU build in its
# own venv (4-5 minutes, mostly pip downloading and unpacking): the two run side by side. G2/G3
# measure one only when asked: make demo ENGINE=llamacpp, kvgate run all --engine vllm, or the
# site's [engine] prefer.
engine: $(BIN)/kvgate
	@missing=""; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	command -v g++ >/dev/null || missing="$$missing g++"; \
	command -v ninja >/dev/null || missing="$$missing ninja-build"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else echo "building llama.cpp needs:$$missing — install with: sudo apt-get install$$missing" >&2; \
	    exit 2; fi; \
	fi
	@rm -f .engine-vllm.rc; \
	{ $(BIN)/kvgate engine install vllm 2>&1; echo $$? > .engine-vllm.rc; } \
	  | sed -u 's/^/[vllm] /' & \
	$(BIN)/kvgate engine install llamacpp; llama=$$?; wait; \
	vllm=$$(cat .engine-vllm.rc 2>/dev/null || echo 1); rm -f .engine-vllm.rc; \
	[ $$llama -eq 0 ] && [ $$vllm -eq 0 ]

# The demo signs its records with this machine's performer key (made once, mode 0600, in
# ~/.config/kvgate or $$KVGATE_KEY_DIR); `kvgate verify --key <its .pub> BUNDLE` checks them.
# It measures the embedded default's own arms (kvgate's simulator) whatever is installed; a real
# engine is one word away: make demo ENGINE=llamacpp (or vllm), after make engine. Its first
# line says which engine G2/G3 measure and why.
ENGINE ?=
demo: tools $(BIN)/kvgate
	@$(BIN)/kvgate key show >/dev/null 2>&1 || $(BIN)/kvgate key new
	$(BIN)/kvgate run all$(if $(ENGINE), --engine $(ENGINE))

# A short working-set sweep on the embedded default (README "Where the array pays"): G3's paired
# probe at five KV working sets, three pairs each, on the simulator (the site's [engine] prefer
# chooses a real engine), its page in reports/sweep-<run>/. Not a gate: it has no verdict.
sweep: tools $(BIN)/kvgate
	@$(BIN)/kvgate key show >/dev/null 2>&1 || $(BIN)/kvgate key new
	$(BIN)/kvgate sweep

# pytest rewrites the asserts of every test module and of gates/ (its plugin) in each worker, 7
# of its 10 s of collecting; where the environment says PYTHONDONTWRITEBYTECODE (as this
# project's machines do) nothing of that is kept. The test runs keep it, outside the tree.
PYTEST := env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX=$(abspath $(VENV))/pycache \
	$(BIN)/python -m pytest

# pytest exits 5 when it collected nothing: that is a broken test setup, not a pass.
# The tests include G2/G3 end to end against the real engine, so CI builds it (or reuses it).
# Four workers on two cores, as `make check`: the end-to-end files mostly wait (rate-limited
# disks, fio, engine start-ups, soak windows); on two workers CI's run took 18 minutes.
TEST_WORKERS ?= 4
test: tools browser faultfs netns engine $(VENV)/.test-extras
	@$(PYTEST) -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder; code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$code

# The developer's loop: every test but the real engines' end-to-end runs (marker real_engine,
# tests/conftest.py), aimed at under 5 minutes on a quiet 2-core machine (README "Which is
# which"). Four workers: the end-to-end files wait on rate-limited disks, fio and engine
# start-ups more than they use the CPU. `make test` is complete.
CHECK_WORKERS ?= 4
check: tools faultfs netns $(VENV)/.test-extras
	@$(PYTEST) -n $(CHECK_WORKERS) --dist loadfile --no-loadscope-reorder -m "not real_engine"; code=$$?; \
	if [ $$code -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$code

# Benchmarks print tables; they are not tests and assert nothing about speed. decision_risk.py
# reads the pairs bench/record_pairs.py recorded (bench/data/), it does not record them, and
# soak_risk.py the G4 windows its --record mode read from demo runs' stores. vs_aiperf.py
# compares with aiperf when it is installed (python bench/vs_aiperf.py --install puts it in
# its own venv under ~/.cache/kvgate); without it, it says how to install it and exits 0.
bench: $(BIN)/kvgate
	$(BIN)/python bench/timing_fidelity.py && $(BIN)/python bench/capacity.py && \
	$(BIN)/python bench/sim_scheduling.py && $(BIN)/python bench/soak_overhead.py && \
	$(BIN)/python bench/report_render.py && $(BIN)/python bench/parse_memory.py && \
	$(BIN)/python bench/decision_risk.py && $(BIN)/python bench/soak_risk.py && \
	$(BIN)/python bench/vs_aiperf.py

# Mutation testing of the decision code with mutmut (pyproject.toml [tool.mutmut]; a copy under
# mutants/, incremental: a second run re-tests only changed functions), then the score per module
# and every survivor not named equivalent in tests/data/mutation/equivalent.toml.
# `make mutants CHANGED=main` mutates only the decision modules changed since main.
mutants: $(VENV)/.test-extras
	$(BIN)/python tests/mutation.py $(if $(CHANGED),--changed $(CHANGED))

# The user guide (docs/, mkdocs.yml) built strict into build/site: a broken link fails it, as it
# fails tests/test_docs.py. docs/gen_reference.py rewrites the key reference from the models.
docs: $(VENV)/.test-extras
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

clean:
	rm -rf $(VENV) mutants .kvgate-target reports/2*/ reports/pytest-html reports/kvgate.sqlite*

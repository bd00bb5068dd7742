# prenorm — a learner needs two commands: `make lab` (open the exercises) and `make check NB=01` (check one);
# a maintainer `make test` (prove it all). Each creates .venv from requirements.txt first if it is missing or
# out of date. What each target is for: README.md (learners), docs/teaching.md, docs/grader.md, CONTRIBUTING.md.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed
NBVAL  := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider
SOLUTION_NOTEBOOKS := $(sort $(wildcard notebooks/[0-9][0-9]_*_solutions.ipynb))
EXERCISE_NOTEBOOKS := $(sort $(wildcard notebooks/exercises/[0-9][0-9]_*.ipynb))

.PHONY: setup lab test lint unit nbval exercises-verify browser figures notebooks \
        exercises check not-every-exercise-passed-yet grade bench bench-browser agents notebook-times site demo experiments \
        experiment clean wheel wheel-check nbval-cpus drift-cpus attacks-as-user hostile-class false-hints

## torch's build. On Linux without an NVIDIA GPU (no nvidia-smi) pip also looks in PyTorch's CPU index, whose
## 2.13.0+cpu satisfies the pin torch==2.13.0 and wins over PyPI's 2.13.0, the CUDA build (several GB more).
## The index is tried first (10 s); if it cannot be reached, setup says so and pip uses only its own
## indexes and find-links (pip would otherwise retry it for every package). TORCH_INDEX= (empty) takes
## pip's default; on macOS and Windows PyPI's torch is a CPU build already.
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
TORCH_INDEX ?= $(if $(filter Linux,$(shell uname -s)),$(if $(shell command -v nvidia-smi),,$(TORCH_CPU_INDEX)))

setup: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	index="$(TORCH_INDEX)"; \
	if [ -n "$$index" ] && ! $(PY) -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/torch/", timeout=10)' \
	     "$$index" 2>/dev/null; then \
	  echo "setup: PyTorch's CPU index $$index cannot be reached; torch comes from pip's other indexes" \
	       "(on Linux PyPI's is the CUDA build)"; index=""; fi; \
	$(PY) -m pip install --quiet $${index:+--extra-index-url "$$index"} -r requirements.txt
	touch $(STAMP)

## Open the course in JupyterLab, at the exercise notebooks (the solutions are one folder up: notebooks/NN_*_solutions.ipynb).
lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ --LabApp.default_url=/lab/tree/exercises $(if $(filter 0,$(shell id -u)),--allow-root)

## Everything CI checks: lint, unit tests, every notebook under nbval, the exercise loop, the browser.
test: $(STAMP) lint unit nbval exercises-verify browser

lint: $(STAMP)
	$(BIN)/ruff check .

unit: $(STAMP)
	$(BIN)/pytest -q -n 2 tests --ignore=tests/course/browser -p no:cacheprovider

## The solution notebooks, and the exercise notebooks as a learner first runs them (every exercise not done).
nbval: $(STAMP)
	$(BIN)/pytest -q $(NBVAL) -n 2 --dist loadfile $(SOLUTION_NOTEBOOKS) $(EXERCISE_NOTEBOOKS)

exercises-verify: $(STAMP)
	$(PY) -m prenorm_course.exercises verify

browser: $(STAMP)
	$(BIN)/pytest -q tests/course/browser -p no:cacheprovider

## Re-execute every solution notebook top to bottom, then rebuild the exercise versions.
notebooks: $(STAMP)
	for nb in $(SOLUTION_NOTEBOOKS); do \
	  $(BIN)/jupyter nbconvert --to notebook --execute --inplace $$nb || exit 1; done
	$(PY) -m prenorm_course.exercises build

exercises: $(STAMP)
	$(PY) -m prenorm_course.exercises build

## Check a learner's exercise notebook: make check NB=01. While an exercise is not passed the exit
## status is non-zero, and make's last line names this verdict: "[…: not-every-exercise-passed-yet] Error 1".
check: $(STAMP) not-every-exercise-passed-yet

not-every-exercise-passed-yet: $(STAMP)
	$(PY) -m prenorm_course.exercises check $(wildcard notebooks/exercises/$(NB)_*.ipynb)

## Grade a folder of learner notebooks: make grade DIR=submissions/ (OUT=grades/ for the tables and feedback,
## JOBS=4 notebooks at once, LEARNER="alice bob" to regrade some learners in OUT's tables)
grade: $(STAMP)
	$(PY) -m prenorm_course.exercises grade $(DIR) $(if $(OUT),--out $(OUT)) $(if $(JOBS),--jobs $(JOBS)) \
	  $(addprefix --learner ,$(LEARNER))

## No false hints: correct answers in several forms checked over DRAWS drawn checks per checker (default 20000);
## every checker must read 0 (ONLY="1.1 4.1" for some, SEED= for other draws, SECONDS= to stop each checker's
## draws after that long, JOBS=2 for two checkers side by side). Without ONLY it writes docs/measurements.md#false-hints.
false-hints: $(STAMP)
	$(PY) -m prenorm_course.exercises.false_hints $(if $(DRAWS),--draws $(DRAWS)) $(if $(SEED),--seed $(SEED)) \
	  $(if $(ONLY),--only $(ONLY)) $(if $(SECONDS),--seconds $(SECONDS)) $(if $(JOBS),--jobs $(JOBS))

## A class graded beside one hostile learner (deep folders, thousands of files, sparse files, a million cells,
## cells at the time limit, CPU hogs): every other row right, and the time with and without them (N=30 learners).
## (its own N: the N ?= 8 below is class-bench's; N=… on the command line still wins)
hostile-class: N = 30
hostile-class: $(STAMP)
	PRENORM_HOSTILE_CLASS=$(N) $(BIN)/pytest -q -s -p no:cacheprovider tests/course/test_hostile_class.py

## The grader's attacks, make check and make grade as a normal user, in a fresh clone with its own .venv
## (as root: as the account prenorm-learner, made if missing). Slow: it installs the requirements.
attacks-as-user:
	.ci/as-normal-user

## Experiment records (prenorm_lib/lab/experiments/results/*.json, shipped in the wheel):
## make experiments (all), make experiment NAME=ffn_ablation (one). PRENORM_DEVICE=cuda|mps trains on a GPU.
## A current record (same configuration, same code) is left as it is; FORCE=1 remakes it anyway.
experiments: $(STAMP)
	$(PY) -m prenorm_lib.lab.experiments run

experiment: $(STAMP)
	@$(PY) -c 'import sys; from prenorm_lib.lab import experiments as e; names = e.available(); \
	  force = sys.argv[-1:] == ["--force"]; given = sys.argv[1:len(sys.argv) - force]; \
	  ok = len(given) == 1 and given[0] in names; \
	  ok or sys.exit("make experiment: NAME must be one of the records " + ", ".join(names) \
	                 + (" (make experiments makes them all), got NAME=" + " ".join(given) if given else ", got none")); \
	  current = not force and e.staleness(given[0]) is None; \
	  current and print(f"{given[0]}: its record is current (same configuration and code), left as it is; FORCE=1 remakes it"); \
	  sys.exit(3 if current else 0)' $(NAME) $(if $(FORCE),--force); \
	status=$$?; if [ $$status = 3 ]; then exit 0; elif [ $$status != 0 ]; then exit $$status; fi; \
	$(PY) -m prenorm_lib.lab.experiments run $(NAME)

figures: $(STAMP)
	$(PY) -m prenorm_lib.lab.figures

## The library against torch's own ops: make bench (REPEATS=5 for a quick look; default 30).
bench: $(STAMP)
	$(PY) -m prenorm_course.bench $(if $(REPEATS),--repeats $(REPEATS))

## The browser tests as a benchmark, for a quiet machine: the classroom's "live at once" limits decide, and a
## full run writes its times (Run All, sliders, the classroom cold and preheated) to docs/measurements.md.
## NB=01 runs one notebook's tests (then nothing is written). CI runs the same tests without limits (make browser).
bench-browser: $(STAMP)
	PRENORM_BENCHMARK=1 $(BIN)/pytest -q tests/course/browser -p no:cacheprovider $(if $(NB),-k "$(NB)_")

## AGENTS.md, the guide for a learner's coding assistant, from the exercise records and the checkers' hints.
agents: $(STAMP)
	$(PY) -m prenorm_course.agents

## How long each notebook takes, top to bottom in a fresh kernel: make notebook-times (NB=03 for one).
notebook-times: $(STAMP)
	$(PY) -m prenorm_course.notebook_times $(if $(NB),$(wildcard notebooks/$(NB)_*_solutions.ipynb))

site: $(STAMP)
	$(PY) -m prenorm_course.site build

## Classroom mode: make demo NB=03 — PORT=8866 picks the port (default: Voilà's 8866 or the next free one),
## DEMO_ARGS passes more Voilà options (e.g. DEMO_ARGS=--no-browser).
demo: $(STAMP)
	$(PY) -m prenorm_course.classroom $(NB) $(if $(PORT),--port=$(PORT) --Voila.port_retries=0) $(DEMO_ARGS)

## The library as a wheel to hand out (dist/prenorm_lib-*.whl): pip install it anywhere, e.g. in Colab.
wheel: $(STAMP)
	rm -rf build && $(PY) -m pip wheel --quiet --no-deps -w dist . && rm -rf build

## The course as a learner installs it: build the wheel, install it with the pinned requirements
## (not the checkout) into a fresh venv, and run every notebook under nbval from a folder outside the checkout.
wheel-check: $(STAMP)
	set -e; rm -rf build; tmp=$$(mktemp -d -t prenorm-wheel-check.XXXXXX); trap 'rm -rf "$$tmp" build' EXIT; \
	$(PY) -m pip wheel --quiet --no-deps -w "$$tmp/dist" .; \
	$(PYTHON) -m venv "$$tmp/venv"; \
	grep -v '^-e ' requirements.txt > "$$tmp/requirements.txt"; \
	"$$tmp/venv/bin/python" -m pip install --quiet -r "$$tmp/requirements.txt" "$$tmp"/dist/prenorm_lib-*.whl; \
	mkdir -p "$$tmp/course/exercises"; \
	cp $(SOLUTION_NOTEBOOKS) tests/nbval_sanitize.cfg "$$tmp/course/"; \
	cp $(EXERCISE_NOTEBOOKS) "$$tmp/course/exercises/"; \
	cd "$$tmp/course"; \
	../venv/bin/python -c 'import prenorm_lib; from prenorm_lib.lab import experiments as e; \
	  assert "site-packages" in prenorm_lib.__file__, prenorm_lib.__file__; \
	  assert not any(e.staleness(n) for n in e.available()), [e.staleness(n) for n in e.available()]'; \
	../venv/bin/python -m pytest -q --nbval --nbval-current-env --nbval-sanitize-with nbval_sanitize.cfg \
	  -p no:cacheprovider -n 2 --dist loadfile --rootdir . $(notdir $(SOLUTION_NOTEBOOKS)) \
	  $(addprefix exercises/,$(notdir $(EXERCISE_NOTEBOOKS)))

## Other CPUs, simulated on this one: every notebook under nbval, and the records' drift tests,
## with torch's and MKL's AVX2 code paths and with ATen's plain C++ (no SIMD) code path.
CPU_PATH_AVX2    := MKL_ENABLE_INSTRUCTIONS=AVX2 ATEN_CPU_CAPABILITY=avx2
CPU_PATH_NO_SIMD := ATEN_CPU_CAPABILITY=default
nbval-cpus: $(STAMP)
	$(CPU_PATH_AVX2) $(BIN)/pytest -q $(NBVAL) -n 2 --dist loadfile $(SOLUTION_NOTEBOOKS) $(EXERCISE_NOTEBOOKS)
	$(CPU_PATH_NO_SIMD) $(BIN)/pytest -q $(NBVAL) -n 2 --dist loadfile $(SOLUTION_NOTEBOOKS) $(EXERCISE_NOTEBOOKS)

drift-cpus: $(STAMP)
	$(CPU_PATH_AVX2) $(BIN)/pytest -q -n 2 tests/lab/test_experiments.py -k todays_code -p no:cacheprovider
	$(CPU_PATH_NO_SIMD) $(BIN)/pytest -q -n 2 tests/lab/test_experiments.py -k todays_code -p no:cacheprovider

## Your notebooks' code in the CS336 handout's layout: make handout (FROM=notebooks/exercises, OUT=handout): the
## modules of 06 and the kernels of 01, 02, 04 as cs336_basics/prenorm_model.py, tests/adapters.py, and the course's
## interface tests, run on the export.
.PHONY: handout
handout: $(STAMP)
	$(PY) -m prenorm_course.handout --notebooks $(or $(FROM),notebooks/exercises) --out $(or $(OUT),handout)

## Gradescope: the autograder zip to upload, dist/gradescope-autograder.zip (NB="01 02" for some notebooks only).
.PHONY: gradescope hub
gradescope: $(STAMP)
	$(PY) -m prenorm_course.gradescope build dist/gradescope-autograder.zip $(if $(NB),--notebooks $(NB))

## A class on this server, as root (docs/teaching.md): make hub prepares the hub folder and starts JupyterHub
## in the background (it outlives your terminal); hub-status, hub-restart (keeps learners' servers), hub-stop.
## MEMORY and CPUS per learner, CULL_IDLE seconds before an idle server is stopped.
HUB_DIR   ?= /srv/prenorm-hub
HUB_PORT  ?= 8000
HUB_IP    ?= 127.0.0.1
MEMORY    ?= 2G
CPUS      ?= 1
CULL_IDLE ?= 3600
HUB_ARGS = --dir $(HUB_DIR) --ip $(HUB_IP) --port $(HUB_PORT) --memory $(MEMORY) --cpus $(CPUS) --cull-idle $(CULL_IDLE)
.PHONY: hub-stop hub-status hub-restart class-bench kernel-memory nbgrader-export
hub: $(STAMP)
	$(PY) -m prenorm_course.hub start $(HUB_ARGS)
hub-restart: $(STAMP)
	$(PY) -m prenorm_course.hub restart $(HUB_ARGS)
hub-stop: $(STAMP)
	$(PY) -m prenorm_course.hub stop --dir $(HUB_DIR)
hub-status: $(STAMP)
	$(PY) -m prenorm_course.hub status --dir $(HUB_DIR)

## How many learners the hub holds: N learners log in through the form at once, pull, run notebook 01
## and save (make class-bench N=20, as root; it makes its own hub folder and accounts, and removes them).
N ?= 8
class-bench: $(STAMP)
	$(PY) -m prenorm_course.hub.class_bench --learners $(N)

## Peak memory of a kernel running each notebook top to bottom, and the sizing table built from it.
kernel-memory: $(STAMP)
	$(PY) -m prenorm_course.hub.class_bench --kernel-memory

## The exercises as nbgrader source notebooks (dist/nbgrader/source/<assignment>/), for teachers who grade with nbgrader.
nbgrader-export: $(STAMP)
	$(PY) -m prenorm_course.nbgrader_export dist/nbgrader

clean:
	rm -rf $(VENV) _site .pytest_cache build

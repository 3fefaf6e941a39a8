PYTHON ?= .venv/bin/python

.PHONY: bench
# Measure what the master adds to a tool call (bench/README.md). Options: make bench ARGS="--cases ws --duration 3"
bench:
	$(PYTHON) -m bench $(ARGS)

.PHONY: fuzz
# Fuzz a master on loopback: schemathesis over its OpenAPI + a WebSocket fuzzer beside well-behaved
# agents (docs/operations/limits.md, "Fuzzing"). Options: make fuzz ARGS="--duration 600 --seed 7"
fuzz:
	$(PYTHON) -m fuzz $(ARGS)

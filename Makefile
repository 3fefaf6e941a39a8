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

.PHONY: a2a-tck
# The A2A TCK's MUST level against a master on loopback (scripts/a2a_tck.py; expected failures in
# scripts/a2a_tck_expected_failures.txt). Options: make a2a-tck ARGS="--tck-dir ../a2a-tck -- -x"
a2a-tck:
	$(PYTHON) -m scripts.a2a_tck $(ARGS)

.PHONY: real-llm
# The real-model check (bench/real_llm.py, docs/guides/local-models.md): SmolLM2-135M on llama.cpp's
# server, a master, fixed queries -> bench/results/real-llm.json. The first run compiles llama.cpp
# (~45 min on 2 cores). Options: make real-llm ARGS="--turns 30" or ARGS="--llm-url http://127.0.0.1:8080/v1"
real-llm:
	bash scripts/real-llm.sh $(ARGS)

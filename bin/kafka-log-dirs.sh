#!/usr/bin/env bash
# kafka-log-dirs.sh: describe the broker's log directories (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.LogDirsCommand "$@"

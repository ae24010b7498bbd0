#!/usr/bin/env bash
# kafka-console-producer.sh: produce lines read from stdin (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.ConsoleProducer "$@"

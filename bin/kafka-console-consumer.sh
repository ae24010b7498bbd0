#!/usr/bin/env bash
# kafka-console-consumer.sh: print records to stdout (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.consumer.ConsoleConsumer "$@"

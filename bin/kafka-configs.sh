#!/usr/bin/env bash
# kafka-configs.sh: describe and alter topic, broker and other configs (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.ConfigCommand "$@"

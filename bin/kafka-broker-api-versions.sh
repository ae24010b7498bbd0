#!/usr/bin/env bash
# kafka-broker-api-versions.sh: the API versions each broker serves (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.BrokerApiVersionsCommand "$@"

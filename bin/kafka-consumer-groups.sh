#!/usr/bin/env bash
# kafka-consumer-groups.sh: list, describe, reset and delete consumer groups (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.consumer.group.ConsumerGroupCommand "$@"

#!/usr/bin/env bash
# kafka-topics.sh: create, list, describe, alter and delete topics (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"

#!/usr/bin/env bash
# kafka-features.sh: describe and update feature levels (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.FeatureCommand "$@"

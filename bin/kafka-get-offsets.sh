#!/usr/bin/env bash
# kafka-get-offsets.sh: earliest, latest, by-time and max-timestamp offsets (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.GetOffsetShell "$@"

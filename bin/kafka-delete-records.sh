#!/usr/bin/env bash
# kafka-delete-records.sh: delete records before an offset (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.DeleteRecordsCommand "$@"

#!/usr/bin/env bash
# kafka-transactions.sh: list, describe, describe-producers, find-hanging and
# abort transactions (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.TransactionsCommand "$@"

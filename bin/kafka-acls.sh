#!/usr/bin/env bash
# kafka-acls.sh: add, list and remove ACLs (Kafka 4.4.0).
exec "$(dirname "$(readlink -f "$0")")/kafka-run-class.sh" org.apache.kafka.tools.AclCommand "$@"

#!/usr/bin/env bash
# kafka-acls.sh: add a LITERAL ALLOW and a PREFIXED DENY, list them all and
# by resource, remove one, list again (CreateAcls, DescribeAcls,
# DeleteAcls). The broker under test has the authorizer on, with the
# tool's principal (User:ANONYMOUS) a super user (tests/integration
# TestKafkaTools); the same round trip is compared with Kafka 4.4 by the
# conformance gate (kafka-acls).
source "$(dirname "$0")/lib.sh"

topic=t-acl-$RANDOM
tool kafka-acls.sh --add --allow-principal User:alice --operation Read --topic "$topic"
expect_rc 0 "--add ALLOW exits 0"
expect_contains "$OUT" "Adding ACLs for resource \`ResourcePattern(resourceType=TOPIC, name=$topic, patternType=LITERAL)\`" "--add names the resource"
expect_contains "$OUT" "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" "--add names the entry"

tool kafka-acls.sh --add --deny-principal User:bob --operation Write --topic "$topic-" --resource-pattern-type prefixed
expect_rc 0 "--add PREFIXED DENY exits 0"

tool kafka-acls.sh --list
expect_rc 0 "--list exits 0"
expect_contains "$OUT" "Current ACLs for resource \`ResourcePattern(resourceType=TOPIC, name=$topic-, patternType=PREFIXED)\`:" "--list shows the prefixed resource"
expect_contains "$OUT" "(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)" "--list shows the DENY"

tool kafka-acls.sh --list --topic "$topic"
expect_rc 0 "--list --topic exits 0"
expect_contains "$OUT" "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" "--list --topic shows its ACL"
expect_lacks "$OUT" "User:bob" "--list --topic leaves out the other resource"

tool kafka-acls.sh --remove --force --allow-principal User:alice --operation Read --topic "$topic"
expect_rc 0 "--remove --force exits 0"
tool kafka-acls.sh --list --topic "$topic"
expect_rc 0 "--list after --remove exits 0"
expect_lacks "$OUT" "User:alice" "the removed ACL is gone"

tool kafka-acls.sh --remove --force --deny-principal User:bob --operation Write --topic "$topic-" --resource-pattern-type prefixed
expect_rc 0 "--remove of the DENY exits 0"

finish

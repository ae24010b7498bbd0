#!/usr/bin/env bash
# kafka-features.sh describe: the finalized feature levels, one line per
# feature, sorted by name. The epoch differs per cluster: its shape only.
# Then upgrade/downgrade/disable with --dry-run (UpdateFeatures, validate
# only) and an upgrade to the level already finalized, which changes nothing.
source "$(dirname "$0")/lib.sh"

tool kafka-features.sh describe
expect_rc 0 "describe exits 0"
sp='[[:space:]]+'
expect_match "$OUT" "^Feature: group.version${sp}SupportedMinVersion: 0${sp}SupportedMaxVersion: 1${sp}FinalizedVersionLevel: 1${sp}Epoch: [0-9]+\$" "group.version is finalized at 1"
# what else is finalized is the conformance gate's business (features-describe)
shape="^Feature: [a-z.]+${sp}SupportedMinVersion: [0-9A-Z.-]+${sp}SupportedMaxVersion: [0-9A-Z.-]+${sp}FinalizedVersionLevel: [0-9A-Z.-]+${sp}Epoch: [0-9]+\$"
expect_equals "$(grep -cvE "$shape" <<<"$OUT")" 0 "every line names a feature, its supported range, level and epoch"
names=$(sed -n 's/^Feature: \([^ ]*\).*/\1/p' <<<"$OUT")
expect_equals "$names" "$(sort <<<"$names")" "features are sorted by name"

tool kafka-features.sh describe --node-id 1
expect_rc 0 "describe --node-id 1 exits 0"
expect_match "$OUT" "^Feature: group.version${sp}SupportedMinVersion: 0${sp}SupportedMaxVersion: 1${sp}FinalizedVersionLevel: 1${sp}Epoch: [0-9]+\$" "describe --node-id 1 lists group.version"

tool kafka-features.sh upgrade --feature group.version=1 --dry-run
expect_rc 0 "upgrade --dry-run to the current level exits 0"
expect_equals "$OUT" "group.version can be upgraded to 1." "upgrade --dry-run to the current level is possible"
tool kafka-features.sh downgrade --feature group.version=0 --dry-run
expect_rc 0 "downgrade --dry-run exits 0"
expect_equals "$OUT" "group.version can be downgraded to 0." "downgrade --dry-run to 0 is possible"
tool kafka-features.sh disable --feature group.version --dry-run
expect_rc 0 "disable --dry-run exits 0"
expect_equals "$OUT" "group.version can be disabled." "disable --dry-run is possible"
tool kafka-features.sh upgrade --feature group.version=1
expect_rc 0 "upgrade to the current level exits 0"
expect_equals "$OUT" "group.version was upgraded to 1." "upgrade to the current level succeeds"
tool kafka-features.sh upgrade --feature group.version=9 --dry-run
expect_rc 1 "upgrade beyond the supported range fails"
expect_contains "$OUT" "Can not upgrade group.version to 9. The update failed for all features since the following feature had an error: Invalid update version 9 for feature group.version." "upgrade beyond the supported range says why"
tool kafka-features.sh upgrade --feature no.such.feature=1 --dry-run
expect_rc 1 "upgrade of an unknown feature fails"
expect_contains "$OUT" "Can not upgrade no.such.feature to 1." "upgrade of an unknown feature says so"
tool kafka-features.sh describe
expect_match "$OUT" "^Feature: group.version${sp}SupportedMinVersion: 0${sp}SupportedMaxVersion: 1${sp}FinalizedVersionLevel: 1${sp}Epoch: [0-9]+\$" "group.version is still finalized at 1"

finish

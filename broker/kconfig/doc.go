// Package kconfig is Kafka 4.4's configuration model: the topic, broker,
// group and client-metrics config keys, and how Kafka parses, validates,
// resolves and describes their values, checked against data captured from
// Kafka 4.4. It does no I/O: the broker stores the values and passes them in.
package kconfig

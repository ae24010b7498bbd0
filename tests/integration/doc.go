// Package integration runs real Kafka clients (kcat/librdkafka, franz-go)
// over TCP against kafgres brokers supervised by real Postgres clusters.
// It needs `make install` first (the Makefile's test target does it).
package integration

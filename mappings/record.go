// Package mappings is the CDC mapping model: mapping definitions from
// kafgres.mapping, validation of their SQL expressions with pg_query, and
// set-based rendering of decoded changes into records inside Postgres.
package mappings

// Record is what one change renders to under one mapping. A nil Value on a
// delete is a tombstone.
type Record struct {
	Topic string
	Key   []byte
	Value []byte
}

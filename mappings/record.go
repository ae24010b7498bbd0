// Package mappings is the CDC mapping model: mapping definitions from
// kafgres.mapping, validation of their SQL expressions with pg_query, and
// set-based rendering of decoded changes into records inside Postgres.
package mappings

import "github.com/kafgres/kafgres/decoder"

// Record is what one change renders to under one mapping. A nil Value on a
// delete is a tombstone.
type Record struct {
	Topic string
	Key   []byte
	Value []byte
}

// Rendered holds the records each change and snapshot row rendered to,
// by item; an item no mapping rendered (or whose filter failed) has none.
type Rendered map[decoder.Item][]Record

package producer

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/decoder"
)

// DeadLetters keeps the records the producer could not append, so that
// none vanishes silently.
type DeadLetters interface {
	DeadLetter(ctx context.Context, dl DeadLetter) error
}

// DeadLetter is one record (or unreadable message) that was not appended.
type DeadLetter struct {
	LSN   decoder.LSN // the message or change the record came from
	Xid   uint32      // its transaction
	Error string      // why it was not appended
	Row   any         // kept as new_row: a DeadRecord or an UnreadableRow
}

// DeadRecord is a record as kafgres.dead_letter keeps it (new_row): bytes
// are base64 (encoding/json's []byte), NULL is null. Index is the record's
// position among its transaction's records, from 1, which tells two
// identical records of one change apart.
type DeadRecord struct {
	Topic     string       `json:"topic"`
	Partition int32        `json:"partition"`
	Key       []byte       `json:"key"`
	Value     []byte       `json:"value"`
	Headers   []DeadHeader `json:"headers"`
	Index     int          `json:"index"`
}

// DeadHeader is a record header in a DeadRecord.
type DeadHeader struct {
	Key   string `json:"key"`
	Value []byte `json:"value"`
}

// UnreadableRow is a message that did not parse, as kafgres.dead_letter
// keeps it: its content in base64 and its position among its
// transaction's records, from 1.
type UnreadableRow struct {
	Content []byte `json:"content"`
	Index   int    `json:"index"`
}

func unreadableRow(u *decoder.Unreadable, index int) UnreadableRow {
	return UnreadableRow{Content: u.Content, Index: index}
}

// deadRecord keeps the partition asked for (-1: the broker chooses).
func deadRecord(rec record, index int) DeadRecord {
	d := DeadRecord{Topic: rec.topic, Partition: rec.partition, Key: rec.key, Value: rec.value, Headers: []DeadHeader{}, Index: index}
	for _, h := range rec.headers {
		d.Headers = append(d.Headers, DeadHeader{Key: h.Key, Value: h.Value})
	}
	return d
}

// PGDeadLetters writes dead letters to kafgres.dead_letter, without a
// mapping (mapping_id NULL).
type PGDeadLetters struct {
	Pool *pgxpool.Pool
}

// The same record may be dead-lettered again when its group is replayed
// (after a crash, or a retry): the unique key (mapping_id, lsn) does not
// hold for a NULL mapping_id, hence NOT EXISTS on the position and the
// record itself. Only the producer inserts such rows, one at a time.
const deadLetterSQL = `
INSERT INTO kafgres.dead_letter (mapping_id, mapping_name, lsn, xid, op, error, new_row)
SELECT NULL, NULL, $1::text::pg_catalog.pg_lsn, $2, NULL, $3, $4::text::pg_catalog.jsonb
 WHERE NOT EXISTS (SELECT 1 FROM kafgres.dead_letter AS d
                    WHERE d.mapping_id IS NULL
                      AND d.lsn OPERATOR(pg_catalog.=) $1::text::pg_catalog.pg_lsn
                      AND d.new_row OPERATOR(pg_catalog.=) $4::text::pg_catalog.jsonb)`

// DeadLetter inserts dl and returns once it is committed.
func (d PGDeadLetters) DeadLetter(ctx context.Context, dl DeadLetter) error {
	row, err := json.Marshal(dl.Row)
	if err != nil {
		return fmt.Errorf("encode dead letter: %w", err)
	}
	if _, err := d.Pool.Exec(ctx, deadLetterSQL, dl.LSN.String(), int64(dl.Xid), dl.Error, string(row)); err != nil {
		return fmt.Errorf("insert into kafgres.dead_letter: %w", err)
	}
	return nil
}

package decoder

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Message content formats, the first byte of a kafgres message's payload
// once the plugin has checked and removed its signature
// (docs/producing.md, "Message format").
const (
	FormatRecord   = 1 // a kafgres_produce record
	FormatSnapshot = 2 // a snapshot row of a CDC mapping
	FormatReplay   = 3 // kafgres_replay_dead_letters: deliver a mapping's marked dead letters here
)

// Produced is one record written by kafgres_produce.
type Produced struct {
	LSN       LSN
	Topic     string
	Partition int32 // -1: the broker chooses
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is a record header; a nil Value is a NULL one.
type Header struct {
	Key   string
	Value []byte
}

// SnapshotRow is one row written by kafgres_snapshot_mapping, to be
// rendered like an insert by one mapping.
type SnapshotRow struct {
	LSN       LSN
	MappingID int64
	Row       string // the row as to_jsonb(row) text
}

// ReplayRequest is written by kafgres_replay_dead_letters: the dead
// letters of the mapping that its transaction marked are rendered again
// and delivered where it commits.
type ReplayRequest struct {
	LSN       LSN
	MappingID int64
}

// Unreadable is a kafgres message whose content does not parse, or a
// frame (Content: the whole frame) whose body does not, or a message of
// the stream that does not (Content: the message) in a transaction
// skipped with kafgres_skip_transaction. It is still committed content:
// the producer keeps it in kafgres.dead_letter rather than let it vanish.
type Unreadable struct {
	LSN     LSN
	Content []byte
	// Whole: Content is a whole frame or stream message, not a message's
	// content.
	Whole bool
	Err   error
}

func (*Produced) isItem()      {}
func (*SnapshotRow) isItem()   {}
func (*ReplayRequest) isItem() {}
func (*Unreadable) isItem()    {}

var errContent = errors.New("malformed kafgres message")

// parseContent decides once what a message is. It never fails: content
// that does not parse is an *Unreadable carrying the reason.
func parseContent(lsn LSN, content []byte, p *Parser) Item {
	r := reader{b: content, p: p}
	var it Item
	switch v := r.uint8(); v {
	case FormatRecord:
		it = r.produced(lsn)
	case FormatSnapshot:
		s := &SnapshotRow{LSN: lsn, MappingID: int64(r.uint64())}
		if r.err == nil {
			row := r.b[r.off:]
			r.off = len(r.b)
			if !json.Valid(row) {
				r.err = errors.New("snapshot row is not JSON")
			}
			s.Row = string(row)
		}
		it = s
	case FormatReplay:
		it = &ReplayRequest{LSN: lsn, MappingID: int64(r.uint64())}
	default:
		if r.err == nil {
			r.err = fmt.Errorf("unknown format %d", v)
		}
	}
	if r.err == nil && r.off != len(r.b) {
		r.err = fmt.Errorf("%d trailing bytes", len(r.b)-r.off)
	}
	if r.err != nil {
		return &Unreadable{LSN: lsn, Content: content, Err: fmt.Errorf("%w: %w", errContent, r.err)}
	}
	return it
}

// produced reads a format-1 payload after its version byte.
func (r *reader) produced(lsn LSN) *Produced {
	p := &Produced{LSN: lsn, Topic: r.string16(), Partition: int32(r.uint32())}
	p.Key = r.bytes32()
	p.Value = r.bytes32()
	n := int(r.uint16())
	// a header takes at least 6 bytes: check before allocating
	if n > 0 && r.need(n*6) {
		p.Headers = make([]Header, 0, n)
		for i := 0; i < n && r.err == nil; i++ {
			k := r.string16()
			p.Headers = append(p.Headers, Header{Key: k, Value: r.bytes32()})
		}
	}
	return p
}

// bytes32 reads an int32 length (-1: NULL, returned as nil) and that many
// bytes.
func (r *reader) bytes32() []byte {
	n := int32(r.uint32())
	if r.err != nil || n == -1 {
		return nil
	}
	if n < 0 {
		r.err = fmt.Errorf("negative length %d at offset %d", n, r.off-4)
		return nil
	}
	if b := r.bytes(int(n)); b != nil {
		return b
	}
	return nil
}

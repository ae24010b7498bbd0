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
	FormatRequest  = 3 // a request about one mapping (MappingRequest)
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

// Kinds of MappingRequest.
const (
	// RequestReplay (kafgres_replay_dead_letters): render again the dead
	// letters First to Last that the request's transaction marked.
	RequestReplay = 'r'
	// RequestPause (the event trigger on a schema change that breaks the
	// mapping): hold its changes from here.
	RequestPause = 'p'
	// RequestResume (kafgres_alter_mapping): deliver what was held, and
	// hold no more.
	RequestResume = 's'
)

// MappingRequest is a request about one mapping at its point of the
// stream, written by kafgres.mapping_request.
type MappingRequest struct {
	LSN         LSN
	Kind        byte
	MappingID   int64
	First, Last int64 // RequestReplay: the dead letters' ids
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

func (*Produced) isItem()       {}
func (*SnapshotRow) isItem()    {}
func (*MappingRequest) isItem() {}
func (*Unreadable) isItem()     {}

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
	case FormatRequest:
		q := &MappingRequest{LSN: lsn, Kind: r.uint8()}
		q.MappingID, q.First, q.Last = int64(r.uint64()), int64(r.uint64()), int64(r.uint64())
		if r.err == nil && q.Kind != RequestReplay && q.Kind != RequestPause && q.Kind != RequestResume {
			r.err = fmt.Errorf("unknown mapping request %q", q.Kind)
		}
		it = q
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

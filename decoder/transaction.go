package decoder

import (
	"fmt"
	"time"
)

// Event is what Run delivers: a *Transaction, a Progress or a Stall.
type Event interface{ isEvent() }

func (*Transaction) isEvent() {}
func (Progress) isEvent()     {}
func (Stall) isEvent()        {}

// Stall says the stream cannot be read past LSN (the start of the message
// that does not parse): Run reconnects and meets it again until the
// plugin or the decoder changes, or the transaction is skipped
// (Config.Skip). Xid and EndLSN name the transaction it belongs to, when
// known (Xid 0: not known, and it cannot be skipped).
type Stall struct {
	LSN    LSN
	Xid    uint32
	EndLSN LSN
	Err    error
}

// Transaction is one committed transaction with kafgres content, complete
// from its B frame to its C frame.
//
// Skipped is set for a transaction that could not be read and was skipped
// (Config.Skip): Items holds what could be read of it, and an *Unreadable
// for each message that could not; none of it is to be appended, all of it
// is to be dead-lettered with the reason. CommitLSN and CommitTime are
// zero when its B frame was not read.
type Transaction struct {
	Xid        uint32
	CommitLSN  LSN // start of the commit record (B/C frame commit_lsn)
	EndLSN     LSN // end of the commit record; the slot is acknowledged with this
	CommitTime time.Time
	Items      []Item // in WAL order
	Skipped    error
	// Bytes is about how much of the replication stream the transaction
	// took: the sizes of the messages its frames came in
	Bytes int
}

// Progress says the walsender has decoded all WAL before LSN and every
// transaction committed before it has already been delivered as an event
// (it comes from keepalive messages: ServerWALEnd; at most one per
// Config.ProgressInterval, carrying the latest position, and only when
// beyond every event delivered before it). Consumers acknowledge it once
// everything delivered before it is durable, so an idle slot does not pin
// WAL.
type Progress struct {
	LSN LSN
}

// assembler groups frames into transactions. The plugin writes a whole
// transaction at its commit, so frames of two transactions never interleave.
type assembler struct {
	txn *Transaction
}

// add takes the next frame of the stream and returns the transaction it
// completes, if any. An error means the stream is not what the plugin
// promises; the caller drops the connection and with it the open transaction.
func (a *assembler) add(f Frame) (*Transaction, error) {
	if f.Kind == KindBegin {
		if a.txn != nil {
			return nil, fmt.Errorf("begin of xid %d while xid %d is open", f.Xid, a.txn.Xid)
		}
		a.txn = &Transaction{Xid: f.Xid, CommitLSN: f.CommitLSN, EndLSN: f.CommitEndLSN, CommitTime: f.CommitTime}
		return nil, nil
	}
	t := a.txn
	if t == nil {
		return nil, fmt.Errorf("frame %c of xid %d outside a transaction", f.Kind, f.Xid)
	}
	if f.Xid != t.Xid || f.CommitEndLSN != t.EndLSN {
		return nil, fmt.Errorf("frame %c of xid %d commit_end_lsn %s inside xid %d commit_end_lsn %s",
			f.Kind, f.Xid, f.CommitEndLSN, t.Xid, t.EndLSN)
	}
	if f.Kind != KindCommit {
		t.Items = append(t.Items, f.Item)
		return nil, nil
	}
	if f.CommitLSN != t.CommitLSN || !f.CommitTime.Equal(t.CommitTime) {
		return nil, fmt.Errorf("commit of xid %d at %s %s does not match its begin at %s %s",
			t.Xid, f.CommitLSN, f.CommitTime.Format(time.RFC3339Nano), t.CommitLSN, t.CommitTime.Format(time.RFC3339Nano))
	}
	a.txn = nil
	return t, nil
}

// reset forgets an open transaction: after a reconnect the server sends it
// again from its B frame.
func (a *assembler) reset() { a.txn = nil }

// Assemble groups frames read from a slot (pg_logical_slot_get_binary_changes
// rather than the stream Run reads) into the transactions they make,
// holding them to what the stream promises: each transaction a B, its
// content and a C that matches it.
func Assemble(frames []Frame) ([]*Transaction, error) {
	var (
		a   assembler
		out []*Transaction
	)
	for i, f := range frames {
		t, err := a.add(f)
		if err != nil {
			return out, fmt.Errorf("frame %d: %w", i+1, err)
		}
		if t != nil {
			out = append(out, t)
		}
	}
	if a.txn != nil {
		return out, fmt.Errorf("xid %d has no commit frame", a.txn.Xid)
	}
	return out, nil
}

package decoder

import (
	"reflect"
	"strings"
	"testing"
)

func TestAssembler(t *testing.T) {
	const xid, commitLSN = 9, LSN(0x5000)
	end := commitLSN + 0x30
	idCol := Column{Name: "id", TypeOID: 23, Kind: ColumnText, Value: []byte("1")}
	insert := header('I', end, xid).u64(0x4100).u32(1).str("s").str("t").ids(1).u8(1).tuple(idCol).u8(0)

	tests := []struct {
		name    string
		frames  []enc
		want    []*Transaction // completed transactions, in order
		wantErr string         // error of the last frame
	}{
		{
			name:   "message and change",
			frames: []enc{beginFrame(xid, commitLSN, end), messageFrame(xid, end, 0x4000, "a"), insert, commitFrame(xid, commitLSN, end)},
			want: []*Transaction{{Xid: xid, CommitLSN: commitLSN, EndLSN: end, CommitTime: commitTime, Items: []Item{
				produced(0x4000, "a"),
				&Change{LSN: 0x4100, Op: 'I', RelID: 1, Schema: "s", Table: "t", Mappings: []int64{1}, New: &Tuple{Columns: []Column{idCol}}},
			}}},
		},
		{
			name: "two transactions",
			frames: []enc{
				beginFrame(1, 0x100, 0x110), messageFrame(1, 0x110, 0x50, "x"), commitFrame(1, 0x100, 0x110),
				beginFrame(2, 0x200, 0x210), messageFrame(2, 0x210, 0x150, "y"), messageFrame(2, 0x210, 0x160, "z"), commitFrame(2, 0x200, 0x210),
			},
			want: []*Transaction{
				{Xid: 1, CommitLSN: 0x100, EndLSN: 0x110, CommitTime: commitTime, Items: []Item{produced(0x50, "x")}},
				{Xid: 2, CommitLSN: 0x200, EndLSN: 0x210, CommitTime: commitTime, Items: []Item{
					produced(0x150, "y"), produced(0x160, "z"),
				}},
			},
		},
		{
			name:   "empty transaction",
			frames: []enc{beginFrame(xid, commitLSN, end), commitFrame(xid, commitLSN, end)},
			want:   []*Transaction{{Xid: xid, CommitLSN: commitLSN, EndLSN: end, CommitTime: commitTime}},
		},
		{
			name:    "message before begin",
			frames:  []enc{messageFrame(xid, end, 0x4000, "a")},
			wantErr: "outside a transaction",
		},
		{
			name:    "commit without begin",
			frames:  []enc{commitFrame(xid, commitLSN, end)},
			wantErr: "outside a transaction",
		},
		{
			name:    "begin inside transaction",
			frames:  []enc{beginFrame(1, 0x100, 0x110), beginFrame(2, 0x200, 0x210)},
			wantErr: "while xid 1 is open",
		},
		{
			name:    "other xid",
			frames:  []enc{beginFrame(1, 0x100, 0x110), messageFrame(2, 0x110, 0x50, "x")},
			wantErr: "inside xid 1",
		},
		{
			name:    "commit_end_lsn mismatch",
			frames:  []enc{beginFrame(1, 0x100, 0x110), messageFrame(1, 0x111, 0x50, "x")},
			wantErr: "commit_end_lsn 0/111 inside xid 1 commit_end_lsn 0/110",
		},
		{
			name:    "commit header mismatch",
			frames:  []enc{beginFrame(1, 0x100, 0x110), commitFrame(1, 0x100, 0x120)},
			wantErr: "inside xid 1",
		},
		{
			name:    "commit_lsn mismatch",
			frames:  []enc{beginFrame(1, 0x100, 0x110), commitFrame(1, 0x101, 0x110)},
			wantErr: "does not match its begin",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a assembler
			var got []*Transaction
			var err error
			for i, b := range tt.frames {
				f, perr := ParseFrame(b)
				if perr != nil {
					t.Fatalf("frame %d: %v", i, perr)
				}
				var txn *Transaction
				txn, err = a.add(f)
				if err != nil && i != len(tt.frames)-1 {
					t.Fatalf("frame %d: %v", i, err)
				}
				if txn != nil {
					got = append(got, txn)
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// After a reconnect the server resends an incomplete transaction from its
// begin; the assembler must drop the partial one and accept the resend.
func TestAssemblerReset(t *testing.T) {
	var a assembler
	for _, b := range []enc{beginFrame(1, 0x100, 0x110), messageFrame(1, 0x110, 0x50, "x")} {
		f, _ := ParseFrame(b)
		if _, err := a.add(f); err != nil {
			t.Fatal(err)
		}
	}
	a.reset()
	var txn *Transaction
	for _, b := range []enc{beginFrame(1, 0x100, 0x110), messageFrame(1, 0x110, 0x50, "x"), commitFrame(1, 0x100, 0x110)} {
		f, _ := ParseFrame(b)
		var err error
		if txn, err = a.add(f); err != nil {
			t.Fatal(err)
		}
	}
	if txn == nil || len(txn.Items) != 1 {
		t.Fatalf("resent transaction: %+v", txn)
	}
}

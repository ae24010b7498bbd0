package segment

import (
	"bytes"
	"testing"
)

const page = pageSize

func resident(t *testing.T, path string, from, to int64) int {
	t.Helper()
	n, err := CachedPages(path, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A log with DropBehind leaves only its newest CachedTail bytes of durable
// log in the page cache; a reader far behind them reads the right bytes and
// drops what it read behind itself. Without DropBehind the pages stay.
func TestLogPageCacheTail(t *testing.T) {
	for _, drop := range []bool{true, false} {
		dir := t.TempDir()
		if ok, err := DropsCache(dir); err != nil || !ok {
			t.Skipf("%s does not drop cached pages (%v)", dir, err)
		}
		const tail = 256 << 10
		l := openTest(t, Options{Dir: dir, Fsync: true, DropBehind: drop, CachedTail: tail})
		var as []appended
		for range 24 {
			as = append(as, writeBatches(t, l, 34, 10<<10)...) // about 1 MiB
			mustSync(t, l)
		}
		path := segmentPath(dir, 0, extLog)
		size := l.Size()
		// Dropped in whole chunks, up to the last one that ends before
		// the tail.
		cold := (size - tail) &^ (dropChunk - 1)
		behind := resident(t, path, 0, cold)
		newest := resident(t, path, (size-tail+page-1)&^(page-1), size)
		wantNewest := int(tail / page)
		if drop {
			if behind != 0 {
				t.Fatalf("%d pages of the %d bytes behind the tail still cached", behind, cold)
			}
			if newest < wantNewest-1 {
				t.Fatalf("%d of the tail's %d pages cached", newest, wantNewest)
			}
		} else if behind < int(cold/page)*9/10 {
			t.Fatalf("without DropBehind only %d pages of %d bytes cached", behind, cold)
		}

		// Read the log from the start, a fetch's worth at a time.
		var got []byte
		for off := int64(0); off < l.LogEndOffset(); {
			b := mustRead(t, l, off, 1<<20, l.LogEndOffset())
			got = append(got, b...)
			off = lastOffsetIn(t, b) + 1
		}
		if !bytes.Equal(got, concat(as)) {
			t.Fatalf("read back %d bytes, not the %d appended", len(got), len(concat(as)))
		}
		if n := resident(t, path, 2<<20, 4<<20); drop && n != 0 {
			t.Fatalf("%d pages of [2 MiB, 4 MiB) cached after the reader passed them", n)
		} else if !drop && n == 0 {
			t.Fatalf("without DropBehind no page of [2 MiB, 4 MiB) cached after a read")
		}
	}
}

// lastOffsetIn is the last offset of the last batch in b.
func lastOffsetIn(t *testing.T, b []byte) int64 {
	t.Helper()
	last := int64(-1)
	for len(b) > 0 {
		h, err := ParseBatchHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		last = h.LastOffset()
		b = b[h.Length:]
	}
	return last
}

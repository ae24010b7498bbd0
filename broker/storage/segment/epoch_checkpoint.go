package segment

// The leader epoch cache on disk: Kafka's leader-epoch-checkpoint
// (LeaderEpochCheckpointFile) in the partition directory, a text file of a
// version line (0), a count line and one "epoch startOffset" line per
// leader epoch, oldest first. The broker writes it when a new epoch starts,
// so that opening the log needs no scan of every batch header to learn
// where each epoch began.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/vfs"
)

const (
	// EpochCheckpointFile is the leader epoch cache's file name.
	EpochCheckpointFile = "leader-epoch-checkpoint"
	epochCheckpointTmp  = EpochCheckpointFile + tempSuffix
)

// EpochEntry is where a leader epoch's batches start.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// WriteEpochCheckpoint replaces dir's leader-epoch-checkpoint with entries,
// atomically (and durably with fsync).
func WriteEpochCheckpoint(fsys vfs.FS, dir string, entries []EpochEntry, fsync bool) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return writeFileAtomic(fsys, dir, EpochCheckpointFile, b.Bytes(), fsync)
}

// ReadEpochCheckpoint reads dir's leader-epoch-checkpoint; ok is false when
// there is none. A file that does not parse, or whose entries do not grow
// in epoch and start offset, is an error.
func ReadEpochCheckpoint(fsys vfs.FS, dir string) (entries []EpochEntry, ok bool, err error) {
	data, err := vfs.ReadFile(fsys, filepath.Join(dir, EpochCheckpointFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read leader epoch checkpoint: %w", err)
	}
	bad := func(why string) error {
		return fmt.Errorf("malformed leader epoch checkpoint in %s: %s", dir, why)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	line := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return strings.TrimSpace(sc.Text()), true
	}
	if v, ok := line(); !ok || v != "0" {
		return nil, false, bad("version is not 0")
	}
	c, ok := line()
	n, err := strconv.Atoi(c)
	if !ok || err != nil || n < 0 {
		return nil, false, bad("bad entry count")
	}
	for i := 0; i < n; i++ {
		l, ok := line()
		fields := strings.Fields(l)
		if !ok || len(fields) != 2 {
			return nil, false, bad("missing entry")
		}
		epoch, err1 := strconv.ParseInt(fields[0], 10, 32)
		start, err2 := strconv.ParseInt(fields[1], 10, 64)
		if err1 != nil || err2 != nil || epoch < 0 || start < 0 {
			return nil, false, bad("bad entry " + strconv.Quote(l))
		}
		e := EpochEntry{Epoch: int32(epoch), StartOffset: start}
		if k := len(entries); k > 0 && (e.Epoch <= entries[k-1].Epoch || e.StartOffset < entries[k-1].StartOffset) {
			return nil, false, bad("entries out of order")
		}
		entries = append(entries, e)
	}
	if rest, ok := line(); ok && rest != "" {
		return nil, false, bad("more entries than counted")
	}
	return entries, true, nil
}

// WriteEpochCheckpoint replaces the log's leader-epoch-checkpoint with
// entries (durably when Options.Fsync is set).
func (l *Log) WriteEpochCheckpoint(entries []EpochEntry) error {
	return WriteEpochCheckpoint(l.opts.FS, l.opts.Dir, entries, l.opts.Fsync)
}

// ReadEpochCheckpoint reads the log's leader-epoch-checkpoint, as the
// function of that name.
func (l *Log) ReadEpochCheckpoint() ([]EpochEntry, bool, error) {
	fsys := l.opts.FS
	return ReadEpochCheckpoint(fsys, l.opts.Dir)
}

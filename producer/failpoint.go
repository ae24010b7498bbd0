package producer

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Failpoint makes the producer die once its nth partition append (counted
// from its start) is durable and before anything after it is appended or
// the slot acknowledged: the window in which a replay must not append
// twice. Crash tests set it (tests/integration/pipeline_placement_test.go);
// nothing else does.
type Failpoint struct {
	Appends int
	Crash   func()
}

// FailpointFile is the file in the broker's data directory that arms a
// failpoint for one start: "crash-after-appends N" (a Failpoint), or
// "unreadable-xid X" (decoder.Config.UnreadableXid: the stream stalls on
// transaction X). It is removed when read, so the broker started after
// that one runs normally.
const FailpointFile = "failpoint"

// ReadFailpoint reads and removes dir's failpoint file: the appends of a
// Failpoint and the xid of an unreadable transaction, zero when not armed.
func ReadFailpoint(dir string) (appends int, unreadableXid uint32, err error) {
	path := filepath.Join(dir, FailpointFile)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	if err := os.Remove(path); err != nil {
		return 0, 0, err
	}
	kind, arg, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, err := strconv.ParseUint(strings.TrimSpace(arg), 10, 32)
	switch {
	case err != nil || n == 0:
	case kind == "crash-after-appends" && n <= 1<<30:
		return int(n), 0, nil
	case kind == "unreadable-xid":
		return 0, uint32(n), nil
	}
	return 0, 0, fmt.Errorf("%s: want \"crash-after-appends N\" or \"unreadable-xid X\", N and X > 0", path)
}

// SetFailpoint arms f; call before Run.
func (p *Producer) SetFailpoint(f Failpoint) { p.failpoint = f }

// appended counts a durable partition append against the failpoint.
func (p *Producer) appended() {
	if p.failpoint.Appends <= 0 {
		return
	}
	if p.failpoint.Appends--; p.failpoint.Appends == 0 {
		p.logger.Warn("failpoint: crashing after a partition append, before acknowledging it")
		p.failpoint.Crash()
	}
}

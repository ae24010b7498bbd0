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
// Failpoint for one start: "crash-after-appends N". It is removed when read,
// so the restarted broker runs normally.
const FailpointFile = "failpoint"

// ReadFailpoint reads and removes dir's failpoint file; zero Appends when
// there is none.
func ReadFailpoint(dir string) (int, error) {
	path := filepath.Join(dir, FailpointFile)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if err := os.Remove(path); err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(b)), "crash-after-appends")))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: want \"crash-after-appends N\", N > 0", path)
	}
	return n, nil
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

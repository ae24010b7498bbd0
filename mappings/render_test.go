package mappings

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// TestTimedOut: only the render time limit running out counts as a
// timeout, never the broker stopping or someone cancelling the query.
func TestTimedOut(t *testing.T) {
	r := &Renderer{timeout: 3 * time.Second}
	live := context.Background()
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"statement timeout", live, &pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}, true},
		{"backstop deadline", live, fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{"cancelled by someone", live, &pgconn.PgError{Code: "57014", Message: "canceling statement due to user request"}, false},
		{"render error", live, &pgconn.PgError{Code: "22012", Message: "division by zero"}, false},
		{"broker stopping", stopped, fmt.Errorf("read: %w", context.DeadlineExceeded), false},
		{"connection lost", live, errors.New("EOF"), false},
	} {
		err := r.timedOut(tc.ctx, tc.err)
		if (err != nil) != tc.want {
			t.Errorf("%s: timedOut = %v, want timeout %v", tc.name, err, tc.want)
		}
		if err != nil && err.Error() != "render timed out after 3s (kafgres.mapping_render_timeout)" {
			t.Errorf("%s: %q", tc.name, err)
		}
	}
	if err := (&Renderer{}).timedOut(live, context.DeadlineExceeded); err != nil {
		t.Errorf("no limit: %v", err)
	}
}

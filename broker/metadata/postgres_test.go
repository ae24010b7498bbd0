package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestConnectionLost(t *testing.T) {
	for _, c := range []struct {
		err  error
		lost bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true}, // terminated by pg_terminate_backend
		{fmt.Errorf("load topics: %w", &pgconn.PgError{Code: "57P01"}), true},
		{&pgconn.PgError{Code: "08006"}, true},
		{fmt.Errorf("load topics: %w", io.ErrUnexpectedEOF), true},
		{&pgconn.PgError{Code: "42P01"}, false}, // a statement's own error
		{errors.New(`topic "t": partition 1 missing`), false},
		{context.Canceled, false},
	} {
		if got := connectionLost(c.err); got != c.lost {
			t.Errorf("connectionLost(%v) = %v, want %v", c.err, got, c.lost)
		}
	}
}

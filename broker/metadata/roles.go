package metadata

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// RoleCredential is what the broker needs of a Postgres role that a Kafka
// client authenticates as (SASL): its SCRAM verifier and whether it may log
// in now.
type RoleCredential struct {
	// Verifier is pg_authid.rolpassword; "" when NULL, or when it is a
	// superuser's and the broker's own role is not a superuser (the
	// function withholds it).
	Verifier   string
	CanLogin   bool      // rolcanlogin
	ValidUntil time.Time // rolvaliduntil; zero when NULL or infinity
	Member     bool      // member of the client role, or no client role asked for
}

// sqlRoleCredentials calls the SECURITY DEFINER function of 0.5.0: the
// broker's role may not read pg_authid itself.
const sqlRoleCredentials = `SELECT role_name, verifier, can_login, valid_until, is_member FROM kafgres.role_credential($1::text[], $2::text)`

// RoleCredentials reads the named roles; a role that does not exist is not
// in the map.
func (s *Postgres) RoleCredentials(ctx context.Context, names []string, clientRole string) (map[string]RoleCredential, error) {
	rows, err := s.pool.Query(ctx, sqlRoleCredentials, names, clientRole)
	if err != nil {
		return nil, fmt.Errorf("read role credentials: %w", err)
	}
	defer rows.Close()
	out := map[string]RoleCredential{}
	for rows.Next() {
		var (
			name     string
			verifier *string
			c        RoleCredential
			until    pgtype.Timestamptz
		)
		if err := rows.Scan(&name, &verifier, &c.CanLogin, &until, &c.Member); err != nil {
			return nil, fmt.Errorf("scan role credentials: %w", err)
		}
		if verifier != nil {
			c.Verifier = *verifier
		}
		if until.Valid && until.InfinityModifier == pgtype.Finite {
			c.ValidUntil = until.Time
		} else if until.Valid && until.InfinityModifier == pgtype.NegativeInfinity {
			c.ValidUntil = time.Unix(0, 0) // -infinity: always expired
		}
		out[name] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read role credentials: %w", err)
	}
	return out, nil
}

// MemoryRole is a role of the in-memory store.
type MemoryRole struct {
	Verifier   string
	CanLogin   bool
	ValidUntil time.Time
	MemberOf   []string // roles it is a member of (besides itself)
}

// SetRole creates or replaces a role (tests: CREATE/ALTER ROLE).
func (m *Memory) SetRole(name string, r MemoryRole) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.roles == nil {
		m.roles = map[string]MemoryRole{}
	}
	m.roles[name] = r
}

// DropRole removes a role (tests: DROP ROLE).
func (m *Memory) DropRole(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.roles, name)
}

// RoleCredentials is Postgres's RoleCredentials over the roles set.
func (m *Memory) RoleCredentials(_ context.Context, names []string, clientRole string) (map[string]RoleCredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]RoleCredential{}
	for _, n := range names {
		r, ok := m.roles[n]
		if !ok {
			continue
		}
		out[n] = RoleCredential{Verifier: r.Verifier, CanLogin: r.CanLogin, ValidUntil: r.ValidUntil,
			Member: clientRole == "" || clientRole == n || slices.Contains(r.MemberOf, clientRole)}
	}
	return out, nil
}

// ScramCredential is a role's SCRAM-SHA-256 credential as Kafka describes
// it: the iteration count of its verifier.
type ScramCredential struct {
	Role       string
	Iterations int32
}

// sqlScramCredentials and sqlScramAlter call the SECURITY DEFINER
// functions of 0.5.0: the broker's role may neither read pg_authid nor
// ALTER ROLE.
const (
	sqlScramCredentials = `SELECT role_name, iterations FROM kafgres.scram_credentials($1::text[], $2::text)`
	sqlScramAlter       = `SELECT kafgres.scram_alter($1, $2, $3, $4, $5)`
)

// ScramCredentials lists the roles with a SCRAM-SHA-256 verifier that are
// members of clientRole ("" for any), by name; names nil lists them all.
func (s *Postgres) ScramCredentials(ctx context.Context, names []string, clientRole string) ([]ScramCredential, error) {
	var arg any
	if names != nil {
		arg = names
	}
	rows, err := s.pool.Query(ctx, sqlScramCredentials, arg, clientRole)
	if err != nil {
		return nil, fmt.Errorf("scram credentials: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ScramCredential, error) {
		var c ScramCredential
		var n int64
		if err := row.Scan(&c.Role, &n); err != nil {
			return c, err
		}
		c.Iterations = int32(min(n, 1<<31-1))
		return c, nil
	})
	if err != nil {
		return nil, fmt.Errorf("scram credentials: %w", err)
	}
	return out, nil
}

// ScramAlter is one AlterUserScramCredentials change: a role's new
// SCRAM-SHA-256 verifier, or "" to delete its credential.
type ScramAlter struct {
	Role     string
	Verifier string
}

// ScramOutcome is what kafgres.scram_alter did with one change.
type ScramOutcome string

// The outcomes of kafgres.scram_alter (sql/kafgres--0.4.0--0.5.0.sql).
const (
	ScramOK           ScramOutcome = "ok"
	ScramDenied       ScramOutcome = "denied"
	ScramUnknown      ScramOutcome = "unknown"
	ScramNoLogin      ScramOutcome = "no_login"
	ScramSuperuser    ScramOutcome = "superuser"
	ScramNoCredential ScramOutcome = "no_credential"
)

// AlterScramCredentials applies changes for principal (connected from
// host) in one transaction; the outcome of each, in order.
func (s *Postgres) AlterScramCredentials(ctx context.Context, principal, host, clientRole string, changes []ScramAlter) ([]ScramOutcome, error) {
	out := make([]ScramOutcome, len(changes))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for i, c := range changes {
			var verifier any
			if c.Verifier != "" {
				verifier = c.Verifier
			}
			var o string
			if err := tx.QueryRow(ctx, sqlScramAlter, principal, host, clientRole, c.Role, verifier).Scan(&o); err != nil {
				return fmt.Errorf("role %q: %w", c.Role, err)
			}
			out[i] = ScramOutcome(o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("alter scram credentials: %w", err)
	}
	return out, nil
}

// ScramCredentials is Postgres's ScramCredentials over the roles set.
func (m *Memory) ScramCredentials(_ context.Context, names []string, clientRole string) ([]ScramCredential, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ScramCredential
	for name, r := range m.roles {
		if names != nil && !slices.Contains(names, name) || !memberOf(name, r, clientRole) {
			continue
		}
		if n, ok := scramIterations(r.Verifier); ok {
			out = append(out, ScramCredential{Role: name, Iterations: n})
		}
	}
	slices.SortFunc(out, func(a, b ScramCredential) int { return strings.Compare(a.Role, b.Role) })
	return out, nil
}

// AlterScramCredentials is Postgres's AlterScramCredentials over the roles
// set, with the same outcomes; the authorizer decision is the caller's
// (the broker checks before calling), so principal only matters for
// superuser roles.
func (m *Memory) AlterScramCredentials(_ context.Context, principal, _, clientRole string, changes []ScramAlter) ([]ScramOutcome, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]ScramOutcome, len(changes))
	for i, c := range changes {
		r, ok := m.roles[c.Role]
		switch {
		case !ok || !memberOf(c.Role, r, clientRole):
			out[i] = ScramUnknown
		case slices.Contains(m.superRoles, c.Role) && !slices.ContainsFunc(m.superRoles, func(s string) bool { return "User:"+s == principal }):
			out[i] = ScramSuperuser
		case c.Verifier == "":
			if _, ok := scramIterations(r.Verifier); !ok {
				out[i] = ScramNoCredential
				continue
			}
			r.Verifier, out[i] = "", ScramOK
		case !r.CanLogin:
			out[i] = ScramNoLogin
		default:
			r.Verifier, out[i] = c.Verifier, ScramOK
		}
		m.roles[c.Role] = r
	}
	return out, nil
}

func memberOf(name string, r MemoryRole, clientRole string) bool {
	return clientRole == "" || clientRole == name || slices.Contains(r.MemberOf, clientRole)
}

// scramIterations is the iteration count of a SCRAM-SHA-256 verifier, as
// kafgres.scram_credentials reads it.
func scramIterations(verifier string) (int32, bool) {
	rest, ok := strings.CutPrefix(verifier, "SCRAM-SHA-256$")
	if !ok {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, ":")
	if !ok || digits == "" || len(digits) > 9 || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

package metadata

import (
	"context"
	"fmt"
	"slices"
	"time"

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

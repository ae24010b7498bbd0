package metadata

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafgres/kafgres/broker/metadata/listen"
	"github.com/kafgres/kafgres/broker/retry"
	"github.com/kafgres/kafgres/security/acl"
)

// ACLs is what the authorizer is built from: the rows of kafgres.acl and
// the Postgres superusers, whose User:<role> principals are super users
// (docs/security.md, "Authorization").
type ACLs struct {
	Bindings       []acl.Binding
	SuperuserRoles []string
}

// aclNotifyChannel is the channel kafgres.acl's trigger notifies.
const aclNotifyChannel = "kafgres_acls"

const (
	sqlLoadACLs       = `SELECT a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host, a.operation, a.permission FROM kafgres.acl AS a`
	sqlSuperuserRoles = `SELECT r.rolname::text FROM pg_catalog.pg_roles AS r WHERE r.rolsuper`
	sqlInsertACL      = `INSERT INTO kafgres.acl (resource_type, resource_name, pattern_type, principal, host, operation, permission) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`
	sqlDeleteACL      = `DELETE FROM kafgres.acl AS a WHERE a.resource_type OPERATOR(pg_catalog.=) $1 AND a.resource_name OPERATOR(pg_catalog.=) $2 AND a.pattern_type OPERATOR(pg_catalog.=) $3 AND a.principal OPERATOR(pg_catalog.=) $4 AND a.host OPERATOR(pg_catalog.=) $5 AND a.operation OPERATOR(pg_catalog.=) $6 AND a.permission OPERATOR(pg_catalog.=) $7`
)

// LoadACLs reads every ACL and the superuser roles in one snapshot.
func (s *Postgres) LoadACLs(ctx context.Context) (ACLs, error) {
	var out ACLs
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, sqlLoadACLs)
		if err != nil {
			return err
		}
		for rows.Next() {
			var rt, name, pt, principal, host, op, perm string
			if err := rows.Scan(&rt, &name, &pt, &principal, &host, &op, &perm); err != nil {
				rows.Close()
				return err
			}
			b, err := bindingFromRow(rt, name, pt, principal, host, op, perm)
			if err != nil {
				rows.Close()
				return err
			}
			out.Bindings = append(out.Bindings, b)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		roles, err := tx.Query(ctx, sqlSuperuserRoles)
		if err != nil {
			return err
		}
		out.SuperuserRoles, err = pgx.CollectRows(roles, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return ACLs{}, fmt.Errorf("load ACLs: %w", err)
	}
	return out, nil
}

// WatchACLs calls changed after every change of kafgres.acl and every
// (re)connection, until ctx ends.
func (s *Postgres) WatchACLs(ctx context.Context, changed func(context.Context) error) {
	listen.Run(ctx, listen.Config{
		Conn:    s.mirror.config,
		Channel: aclNotifyChannel,
		Retry:   retry.Policy{Min: watchRetryEvery, Max: watchRetryEvery},
		Log:     s.log,
	}, changed)
}

// CreateACLs stores bindings (those that exist already are left alone) in
// one transaction.
func (s *Postgres) CreateACLs(ctx context.Context, bindings []acl.Binding) error {
	return s.aclBatch(ctx, sqlInsertACL, bindings)
}

// DeleteACLs removes bindings in one transaction.
func (s *Postgres) DeleteACLs(ctx context.Context, bindings []acl.Binding) error {
	return s.aclBatch(ctx, sqlDeleteACL, bindings)
}

func (s *Postgres) aclBatch(ctx context.Context, sql string, bindings []acl.Binding) error {
	if len(bindings) == 0 {
		return nil
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, b := range bindings {
			r := rowFromBinding(b)
			if _, err := tx.Exec(ctx, sql, r[0], r[1], r[2], r[3], r[4], r[5], r[6]); err != nil {
				return fmt.Errorf("store ACL %s: %w", b, err)
			}
		}
		return nil
	})
}

// rowFromBinding spells b as kafgres.acl does: Kafka's enum names.
func rowFromBinding(b acl.Binding) [7]string {
	return [7]string{b.ResourceType.String(), b.ResourceName, b.PatternType.String(), b.Principal, b.Host,
		b.Operation.String(), b.Permission.String()}
}

func bindingFromRow(rt, name, pt, principal, host, op, perm string) (acl.Binding, error) {
	b := acl.Binding{ResourceName: name, Principal: principal, Host: host}
	var err error
	if b.ResourceType, err = kmsg.ParseACLResourceType(rt); err != nil {
		return b, err
	}
	if b.PatternType, err = kmsg.ParseACLResourcePatternType(pt); err != nil {
		return b, err
	}
	if b.Operation, err = kmsg.ParseACLOperation(op); err != nil {
		return b, err
	}
	if b.Permission, err = kmsg.ParseACLPermissionType(perm); err != nil {
		return b, err
	}
	return b, nil
}

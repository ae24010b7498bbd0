// Package metadata is everything the broker keeps in Postgres: the topic
// catalog and its configs, the dynamic broker configs, committed offsets,
// feature levels, client quotas, producer ids and the log-end mirror. It
// owns every SQL statement and every pgx call the broker makes; the broker
// reaches it through interfaces it declares itself (broker/store.go), so
// handlers never see pgx and can be tested against Memory instead.
//
// Every statement names its schema and qualifies its operators: the broker
// runs as a role whose search_path it does not control.
package metadata

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafgres/kafgres/broker/retry"
)

// Errors a caller turns into Kafka error codes.
var (
	// ErrTopicExists: a topic of that name was created concurrently.
	ErrTopicExists = errors.New("topic already exists")
	// ErrUnknownTopic: the topic does not exist (or was dropped
	// concurrently).
	ErrUnknownTopic = errors.New("unknown topic")
	// ErrPartitionsChanged: the partition count grew concurrently past
	// the one asked for.
	ErrPartitionsChanged = errors.New("partition count changed concurrently")
)

// Postgres is the metadata store in the kafgres extension's tables.
type Postgres struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	// mirror is the dedicated connection of the log-end mirror (mirror.go).
	mirror mirrorConn
}

// poolConns is the size of the metadata pool.
const poolConns = 8

const sqlExtensionVersion = `SELECT coalesce((SELECT e.extversion FROM pg_catalog.pg_extension AS e WHERE e.extname OPERATOR(pg_catalog.=) 'kafgres'), '')`

// Connect opens the metadata pool, retrying every second until Postgres
// answers and the kafgres extension exists at schemaVersion: under the
// supervisor the broker starts before anyone has had a chance to run
// CREATE EXTENSION. Each reason it waits for is logged once.
func Connect(ctx context.Context, dsn, schemaVersion string, log *slog.Logger) (*Postgres, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse dsn: %w", err)
	}
	if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "kafgres"
	}
	pcfg.MaxConns = poolConns
	var s *Postgres
	err = retry.Run(ctx, retry.Policy{Min: connectRetryEvery, Max: connectRetryEvery}, func(ctx context.Context) (bool, error) {
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return false, err
		}
		var version string
		err = pool.QueryRow(ctx, sqlExtensionVersion).Scan(&version)
		if err == nil && version == schemaVersion {
			s = &Postgres{pool: pool, log: log, mirror: mirrorConn{config: pcfg.ConnConfig}}
			return true, nil
		}
		pool.Close()
		switch {
		case err != nil:
			return false, err
		case version == "":
			return false, errors.New("extension kafgres is not installed; run CREATE EXTENSION kafgres")
		default:
			return false, fmt.Errorf("extension kafgres is at version %s, this broker needs %s; run ALTER EXTENSION kafgres UPDATE", version, schemaVersion)
		}
	}, func(f retry.Failure) {
		if f.Log {
			log.Warn("waiting for Postgres", "err", f.Err)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	return s, nil
}

// connectRetryEvery is how often Connect tries again while Postgres starts
// or the extension is being created.
const connectRetryEvery = time.Second

// Close closes the pool and the mirror's connection.
func (s *Postgres) Close() {
	s.mirror.close()
	s.pool.Close()
}

const sqlClusterID = `SELECT system_identifier FROM pg_catalog.pg_control_system()`

// ClusterID derives Kafka's 22-character cluster id from the Postgres
// system identifier, so it is stable for the life of the cluster and needs
// no table of its own.
func (s *Postgres) ClusterID(ctx context.Context) (string, error) {
	var sysid int64
	if err := s.pool.QueryRow(ctx, sqlClusterID).Scan(&sysid); err != nil {
		return "", fmt.Errorf("read system identifier: %w", err)
	}
	return clusterID(sysid), nil
}

func clusterID(sysid int64) string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], uint64(sysid))
	copy(raw[8:], "kafgres\x00")
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

const sqlNextProducerID = `SELECT pg_catalog.nextval('kafgres.producer_id_seq')`

// NextProducerID allocates a producer id (InitProducerId).
func (s *Postgres) NextProducerID(ctx context.Context) (int64, error) {
	var id int64
	if err := s.pool.QueryRow(ctx, sqlNextProducerID).Scan(&id); err != nil {
		return 0, fmt.Errorf("allocate producer id: %w", err)
	}
	return id, nil
}

// maxStaleConns bounds the retries of a read that met a dead connection:
// the pool holds at most this many.
const maxStaleConns = poolConns

// connectionLost reports an error that says the connection, not the
// statement, failed: the server ended the session (class 57P: terminated
// by an administrator, shut down) or the connection broke (class 08, or an
// error that never reached Postgres's protocol).
func connectionLost(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "57P") || strings.HasPrefix(pgErr.Code, "08")
	}
	var netErr net.Error
	return pgconn.SafeToRetry(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		(errors.As(err, &netErr) && !netErr.Timeout())
}

// sqlState is the SQLSTATE of a Postgres error, or "".
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// inTx runs f in a transaction bounded by txTimeout that commits only when
// commit is true and f succeeded: a validate-only change goes through the
// same locks and reads as a real one, then rolls back.
func (s *Postgres) inTx(ctx context.Context, commit bool, f func(pgx.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, txTimeout)
	defer cancel()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback(context.Background())
	if err := f(tx); err != nil {
		return err
	}
	if !commit {
		return nil
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// txTimeout bounds a metadata transaction: an alter waiting on a lock
// someone holds in SQL must not hold the client forever.
const txTimeout = 30 * time.Second

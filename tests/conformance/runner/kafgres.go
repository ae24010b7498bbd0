package main

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Kafgres is a cluster started the way users start one: the installed
// extension and broker (`make install`), through tests/pgcluster.sh.
type Kafgres struct {
	Dir       string `json:"dir"`
	PGPort    int    `json:"pg_port"`
	KafkaPort int    `json:"kafka_port"`
	// Secure: KafkaPort is a SASL_PLAINTEXT listener and SSLPort a
	// SASL_SSL one (secure.go); else KafkaPort is PLAINTEXT.
	Secure  bool `json:"secure,omitempty"`
	SSLPort int  `json:"ssl_port,omitempty"`
	// Engine is kafgres.storage_engine, the engine of every topic the
	// gate creates (the internal topics stay segment topics); "" leaves it
	// to $KAFGRES_STORAGE_ENGINE, then to the default.
	Engine string `json:"engine,omitempty"`
	repo   string
	pki    *PKI
}

// Addr is the bootstrap address clients use.
func (k *Kafgres) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.KafkaPort)) }

// SSLAddr is the SASL_SSL listener of a secure cluster.
func (k *Kafgres) SSLAddr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.SSLPort)) }

// StartKafgres creates a fresh cluster in dir on free ports whose topics
// are kept by engine ("" for the default; Kafgres.Engine).
func StartKafgres(ctx context.Context, repo, dir, engine string) (*Kafgres, error) {
	return startKafgres(ctx, repo, dir, engine, nil)
}

// StartSecureKafgres creates the kafgres cluster of the secure pair: the
// listeners, certificate, users and super user of the secure reference
// broker (secure.go), the users as Postgres roles with LOGIN.
func StartSecureKafgres(ctx context.Context, repo, dir string, pki *PKI) (*Kafgres, error) {
	k, err := startKafgres(ctx, repo, dir, "", pki)
	if err != nil {
		return nil, err
	}
	conn, err := k.connect(ctx)
	if err != nil {
		k.Stop()
		return nil, err
	}
	defer conn.Close(context.Background())
	for _, u := range secureUsers {
		q := fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s", pgx.Identifier{u.Name}.Sanitize(), quoteLiteral(u.Password))
		if _, err := conn.Exec(ctx, q); err != nil {
			k.Stop()
			return nil, fmt.Errorf("create role %s: %w", u.Name, err)
		}
	}
	return k, nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func startKafgres(ctx context.Context, repo, dir, engine string, pki *PKI) (*Kafgres, error) {
	if old, err := loadState[Kafgres](dir); err == nil {
		old.repo = repo
		old.Stop()
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", dir, err)
	}
	// pgcluster.sh runs the server as "postgres" when we are root: the
	// directory and its parents must be reachable for that user
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	k := &Kafgres{Dir: dir, repo: repo, Secure: pki != nil, pki: pki, Engine: engine}
	var err error
	if k.PGPort, err = freePort(); err != nil {
		return nil, err
	}
	if k.KafkaPort, err = freePort(); err != nil {
		return nil, err
	}
	if k.Secure {
		if k.SSLPort, err = freePort(); err != nil {
			return nil, err
		}
	}
	if err := saveState(dir, k); err != nil {
		return nil, err
	}
	if out, err := k.script(ctx, "start", strconv.Itoa(k.PGPort), strconv.Itoa(k.KafkaPort)); err != nil {
		return nil, fmt.Errorf("start kafgres with tests/pgcluster.sh: %w\n%s", err, out)
	}
	return k, nil
}

// LoadKafgres finds the cluster a previous `runner kafgres start` left in dir.
func LoadKafgres(repo, dir string) (*Kafgres, error) {
	k, err := loadState[Kafgres](dir)
	if err != nil {
		return nil, fmt.Errorf("no kafgres cluster recorded in %s: %w", dir, err)
	}
	k.repo = repo
	return k, nil
}

// gateConf is what the gate's cluster adds to postgresql.conf (through
// pgcluster.sh's KAFGRES_PG_CONF): the reference broker runs with
// group.initial.rebalance.delay.ms=0, so kafgres's first rebalance of a
// new group must not wait either, or the group scenarios would differ in
// timing (and could run out of their 30 s). Both look for timed-out
// transactions every 500 ms (Kafka's default is 10 s), so that the
// txn-timeout-abort scenario sees its transaction aborted within its
// budget, at about the same time on both. Both log cleaners look for
// dirty compacted partitions every 500 ms (Kafka's log.cleaner.backoff.ms
// is 15 s), so that the compaction scenario sees its cleans well within
// its budget.
const gateConf = `kafgres.group_initial_rebalance_delay = 0
kafgres.transaction_abort_timed_out_interval = 500
kafgres.log_cleaner_backoff = 500`

// secureConf is what the secure pair's cluster adds: the reference's
// listeners (pgcluster.sh waits for KafkaPort, the SASL_PLAINTEXT one),
// its certificate and super user. The authorizer is on by itself
// (kafgres.authorizer = auto: a listener is not PLAINTEXT).
func (k *Kafgres) secureConf() string {
	return fmt.Sprintf(`
kafgres.listeners = 'SASL_PLAINTEXT://127.0.0.1:%d,SASL_SSL://127.0.0.1:%d'
kafgres.ssl_cert_file = '%s'
kafgres.ssl_key_file = '%s'
kafgres.sasl_enabled_mechanisms = 'SCRAM-SHA-256,PLAIN'
kafgres.super_users = '%s'
kafgres.allow_everyone_if_no_acl_found = off`, k.KafkaPort, k.SSLPort, k.pki.CertFile, k.pki.KeyFile, secureSuperUser)
}

func (k *Kafgres) script(ctx context.Context, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(k.repo, "tests", "pgcluster.sh"), args[0], k.Dir}, args[1:]...)
	cmd := exec.CommandContext(ctx, "bash", argv...)
	conf := gateConf
	// The catalogue is the same for both engines, since an engine may add
	// no client-visible difference.
	if e := cmp.Or(k.Engine, os.Getenv("KAFGRES_STORAGE_ENGINE")); e != "" {
		conf += "\nkafgres.storage_engine = '" + e + "'"
	}
	if k.Secure && k.pki != nil {
		conf += k.secureConf()
	}
	cmd.Env = append(os.Environ(), "KAFGRES_PG_CONF="+conf)
	return cmd.CombinedOutput()
}

func (k *Kafgres) connect(ctx context.Context) (*pgx.Conn, error) {
	dsn := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", filepath.Join(k.Dir, "run"), k.PGPort)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connect to kafgres's Postgres: %w", err)
	}
	return conn, nil
}

// Stop stops Postgres, which stops the broker with it.
func (k *Kafgres) Stop() error {
	if out, err := k.script(context.Background(), "stop"); err != nil {
		return fmt.Errorf("stop kafgres: %w\n%s", err, out)
	}
	return nil
}

// CreateTopics creates topics with kafgres_create_topic, as a user would.
func (k *Kafgres) CreateTopics(ctx context.Context, topics []TopicSpec) error {
	conn, err := k.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	for _, t := range topics {
		if _, err := conn.Exec(ctx, "SELECT kafgres_create_topic($1, $2)", t.Name, t.Partitions); err != nil {
			return fmt.Errorf("kafgres_create_topic(%s, %d): %w", t.Name, t.Partitions, err)
		}
	}
	return nil
}

// LogTail is the end of the Postgres log, which holds the broker's output.
func (k *Kafgres) LogTail() string {
	b, _ := os.ReadFile(filepath.Join(k.Dir, "postgres.log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

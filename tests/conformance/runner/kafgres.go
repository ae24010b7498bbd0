package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Kafgres is a cluster started the way users start one: the installed
// extension and broker (`make install`), through tests/pgcluster.sh.
type Kafgres struct {
	Dir       string `json:"dir"`
	PGPort    int    `json:"pg_port"`
	KafkaPort int    `json:"kafka_port"`
	repo      string
}

// Addr is the bootstrap address clients use.
func (k *Kafgres) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(k.KafkaPort)) }

// StartKafgres creates a fresh cluster in dir on free ports.
func StartKafgres(ctx context.Context, repo, dir string) (*Kafgres, error) {
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
	k := &Kafgres{Dir: dir, repo: repo}
	var err error
	if k.PGPort, err = freePort(); err != nil {
		return nil, err
	}
	if k.KafkaPort, err = freePort(); err != nil {
		return nil, err
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
// timing (and could run out of their 30 s).
const gateConf = "kafgres.group_initial_rebalance_delay = 0"

func (k *Kafgres) script(ctx context.Context, args ...string) ([]byte, error) {
	argv := append([]string{filepath.Join(k.repo, "tests", "pgcluster.sh"), args[0], k.Dir}, args[1:]...)
	cmd := exec.CommandContext(ctx, "bash", argv...)
	cmd.Env = append(os.Environ(), "KAFGRES_PG_CONF="+gateConf)
	return cmd.CombinedOutput()
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
	dsn := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres", filepath.Join(k.Dir, "run"), k.PGPort)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to kafgres's Postgres: %w", err)
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

package metadata

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/kafgres/kafgres/broker/metadata/listen"
	"github.com/kafgres/kafgres/broker/retry"
)

// Topic is one row of kafgres.topic with its partitions' leader epochs
// (index = partition) and its config overrides (canonical strings by key).
type Topic struct {
	ID      int64
	Name    string
	UUID    [16]byte
	Epochs  []int32
	Configs map[string]string
	// StorageEngine is "segment" or "table" (kafgres.topic.storage_engine),
	// fixed when the topic was created.
	StorageEngine string
}

// Catalog is everything the broker's topic cache is built from: the topics
// and the dynamic broker configs of one node and of the cluster default.
type Catalog struct {
	Topics                    []Topic
	BrokerNode, BrokerCluster map[string]string
}

// DroppedTopic is a row of kafgres.dropped_topic: a topic whose log may
// still be on disk.
type DroppedTopic struct {
	ID   int64
	UUID [16]byte
}

const (
	sqlBumpEpochs = `UPDATE kafgres.partition SET leader_epoch = leader_epoch OPERATOR(pg_catalog.+) 1`
	sqlLoadTopics = `
SELECT t.topic_id, t.name, t.topic_uuid, t.storage_engine, p.partition, p.leader_epoch
FROM kafgres.topic t JOIN kafgres.partition p ON p.topic_id OPERATOR(pg_catalog.=) t.topic_id
ORDER BY t.topic_id, p.partition`
	sqlLoadTopicConfigs = `SELECT topic_id, name, value FROM kafgres.topic_config WHERE value IS NOT NULL`
	sqlCreateTopic      = `SELECT public.kafgres_create_topic($1, $2)`
	sqlCreatePartitions = `SELECT public.kafgres_create_partitions($1, $2)`
	sqlDropTopic        = `SELECT public.kafgres_drop_topic($1)`
	sqlDroppedTopics    = `
SELECT topic_id, topic_uuid FROM kafgres.dropped_topic
WHERE topic_id OPERATOR(pg_catalog.=) ANY ($1::bigint[])`
	sqlTopicIDSequence = `SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM kafgres.topic_id_seq`
	// notifyChannel is what every change of topics, their configs and the
	// broker configs notifies (the extension's triggers).
	notifyChannel = "kafgres_topics"
)

// BumpLeaderEpochs makes every partition's leader epoch one higher: a new
// broker incarnation is a new leader.
func (s *Postgres) BumpLeaderEpochs(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, sqlBumpEpochs); err != nil {
		return fmt.Errorf("bump leader epochs: %w", err)
	}
	return nil
}

// LoadCatalog reads topics with their configs and the dynamic broker
// configs of node nodeID. They are separate statements: a config change
// between them is caught by the NOTIFY it sends, which makes the catalog
// reload again.
//
// The reads are retried on a connection that turns out dead (a backend
// terminated, Postgres restarted): the pool then hands out a fresh one,
// and a lookup that reloads on a miss must find a topic created a moment
// ago rather than fail on the pool's stale connections.
func (s *Postgres) LoadCatalog(ctx context.Context, nodeID int32) (Catalog, error) {
	var (
		c   Catalog
		err error
	)
	for attempt := 0; attempt <= maxStaleConns; attempt++ {
		if c, err = s.loadCatalog(ctx, nodeID); err == nil || !connectionLost(err) || ctx.Err() != nil {
			break
		}
	}
	return c, err
}

func (s *Postgres) loadCatalog(ctx context.Context, nodeID int32) (Catalog, error) {
	topics, err := s.loadTopics(ctx)
	if err != nil {
		return Catalog{}, err
	}
	configs, err := s.loadTopicConfigs(ctx)
	if err != nil {
		return Catalog{}, err
	}
	for i := range topics {
		topics[i].Configs = configs[topics[i].ID]
	}
	out := Catalog{Topics: topics}
	out.BrokerNode, out.BrokerCluster, err = readBrokerConfigs(ctx, s.pool, nodeID)
	return out, err
}

func (s *Postgres) loadTopicConfigs(ctx context.Context) (map[int64]map[string]string, error) {
	rows, err := s.pool.Query(ctx, sqlLoadTopicConfigs)
	if err != nil {
		return nil, fmt.Errorf("load topic configs: %w", err)
	}
	defer rows.Close()
	out := map[int64]map[string]string{}
	for rows.Next() {
		var (
			id          int64
			name, value string
		)
		if err := rows.Scan(&id, &name, &value); err != nil {
			return nil, fmt.Errorf("scan topic config: %w", err)
		}
		if out[id] == nil {
			out[id] = map[string]string{}
		}
		out[id][name] = value
	}
	return out, rows.Err()
}

func (s *Postgres) loadTopics(ctx context.Context) ([]Topic, error) {
	rows, err := s.pool.Query(ctx, sqlLoadTopics)
	if err != nil {
		return nil, fmt.Errorf("load topics: %w", err)
	}
	defer rows.Close()
	var out []Topic
	for rows.Next() {
		var (
			id     int64
			name   string
			uuid   [16]byte
			engine string
			p      int32
			epoch  int32
		)
		if err := rows.Scan(&id, &name, &uuid, &engine, &p, &epoch); err != nil {
			return nil, fmt.Errorf("scan topic row: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].ID != id {
			out = append(out, Topic{ID: id, Name: name, UUID: uuid, StorageEngine: engine})
		}
		last := &out[len(out)-1]
		if int(p) != len(last.Epochs) {
			return nil, fmt.Errorf("topic %q: partition %d missing", name, len(last.Epochs))
		}
		last.Epochs = append(last.Epochs, epoch)
	}
	return out, rows.Err()
}

// CreateTopic creates a topic through the SQL function (so its validation
// lives in one place) with its config overrides, in one transaction.
func (s *Postgres) CreateTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id int64
		if err := tx.QueryRow(ctx, sqlCreateTopic, name, partitions).Scan(&id); err != nil {
			return err
		}
		return insertTopicConfigs(ctx, tx, id, configs)
	})
	if err != nil {
		if sqlState(err) == "42710" { // duplicate_object: created concurrently
			return ErrTopicExists
		}
		return fmt.Errorf("create topic %q: %w", name, err)
	}
	return nil
}

// DropTopic deletes a topic; the extension records it in
// kafgres.dropped_topic until its log is gone.
func (s *Postgres) DropTopic(ctx context.Context, name string) error {
	if _, err := s.pool.Exec(ctx, sqlDropTopic, name); err != nil {
		if sqlState(err) == "42704" { // undefined_object: dropped concurrently
			return ErrUnknownTopic
		}
		return fmt.Errorf("drop topic %q: %w", name, err)
	}
	return nil
}

// CreatePartitions grows a topic to count partitions.
func (s *Postgres) CreatePartitions(ctx context.Context, name string, count int32) error {
	if _, err := s.pool.Exec(ctx, sqlCreatePartitions, name, count); err != nil {
		switch sqlState(err) {
		case "42704":
			return ErrUnknownTopic
		case "22023": // grown concurrently past count
			return ErrPartitionsChanged
		}
		return fmt.Errorf("create partitions of %q: %w", name, err)
	}
	return nil
}

// DroppedTopics returns which of the topic ids kafgres.dropped_topic
// lists, with the uuid each had.
func (s *Postgres) DroppedTopics(ctx context.Context, ids []int64) ([]DroppedTopic, error) {
	rows, err := s.pool.Query(ctx, sqlDroppedTopics, ids)
	if err != nil {
		return nil, fmt.Errorf("read dropped topics: %w", err)
	}
	defer rows.Close()
	var out []DroppedTopic
	for rows.Next() {
		var d DroppedTopic
		if err := rows.Scan(&d.ID, &d.UUID); err != nil {
			return nil, fmt.Errorf("scan dropped topic: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// TopicIDSequence is the last topic id handed out (0: none yet), which
// tells a data directory from another cluster's or from the future.
func (s *Postgres) TopicIDSequence(ctx context.Context) (int64, error) {
	var seq int64
	if err := s.pool.QueryRow(ctx, sqlTopicIDSequence).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read topic id sequence: %w", err)
	}
	return seq, nil
}

// WatchCatalog calls changed whenever Postgres says topics or configs
// changed, and after every (re)connection, since a notification may have
// been missed meanwhile; it returns when ctx ends. An error of changed is
// logged; losing the connection is logged and retried every second.
func (s *Postgres) WatchCatalog(ctx context.Context, changed func(context.Context) error) {
	listen.Run(ctx, listen.Config{
		Conn:    s.mirror.config,
		Channel: notifyChannel,
		Retry:   retry.Policy{Min: watchRetryEvery, Max: watchRetryEvery},
		Log:     s.log,
	}, changed)
}

// watchRetryEvery is how often a lost LISTEN connection is retried.
const watchRetryEvery = time.Second

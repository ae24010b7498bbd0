package broker

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/kafgres/kafgres/broker/kconfig"
	"github.com/kafgres/kafgres/broker/storage"
)

// topic is one row of kafgres.topic with its open partitions. A topic value
// is immutable once published in the catalog except for parts growing.
type topic struct {
	id    int64
	name  string
	uuid  [16]byte
	parts []*partition
	// configs are the topic's overrides (kafgres.topic_config), canonical
	// strings by key; see package kconfig. settings are the effective
	// values computed at load (nil: compute on demand). Never written once
	// published.
	configs  map[string]string
	settings *kconfig.TopicSettings
	// tableEngine: the topic's batches are rows of kafgres.log_batch
	// (broker/storage/table), not segment files.
	tableEngine bool
}

// catalog is the broker's cache of kafgres.topic / kafgres.partition. Postgres
// is the source of truth: every change there sends NOTIFY kafgres_topics and
// the catalog reloads.
type catalog struct {
	b *Broker

	mu     sync.RWMutex
	byName map[string]*topic
	byID   map[[16]byte]*topic
	// brokers is the broker configuration as of the last load, with
	// kafgres.broker_config's rows (see package kconfig); replaced whole
	// on reload, never written once published.
	brokers *kconfig.Configs

	reloadMu sync.Mutex // one reload at a time

	// missMu orders the reloads that misses ask for; under it, lastMiss is
	// when the last of them started and missed when each name (or id)
	// last made one.
	missMu   sync.Mutex
	lastMiss time.Time
	missed   map[string]time.Time
}

// A lookup that misses reloads the catalog from Postgres, to cover a
// notification still on its way (a topic created in SQL is served as soon
// as its transaction commits), but a client asking again and again for a
// topic that does not exist must not become a query per request: a name
// reloads at most every missReloadInterval, and all misses together at
// most every missReloadGap (waiting for it rather than skipping, so that
// a topic's first miss always reloads). missedNames bounds the memory of
// names missed.
const (
	missReloadInterval = 100 * time.Millisecond
	missReloadGap      = 50 * time.Millisecond
	missedNames        = 1024
)

func newCatalog(b *Broker) *catalog {
	return &catalog{b: b, byName: map[string]*topic{}, byID: map[[16]byte]*topic{}}
}

// start checks the data directory against the catalog (waiting while the
// log is ahead of it, and removing directories of topics dropped while the
// broker was down; see package storage), bumps every partition's leader
// epoch (a new broker incarnation is a new leader), then loads and
// recovers every partition.
func (c *catalog) start(ctx context.Context) error {
	// The data directory may have just been created (Broker.New): make
	// its entry durable before anything is put in it. A parent we may not
	// read is someone else's business, not a failure.
	if err := c.b.data.SyncParent(); errors.Is(err, storage.ErrParentUnreadable) {
		c.b.log.Warn("cannot fsync the parent of the data directory", "err", err)
	} else if err != nil {
		return err
	}
	if err := c.waitDataDir(ctx); err != nil {
		return err
	}
	if err := c.b.meta.BumpLeaderEpochs(ctx); err != nil {
		return err
	}
	return c.reload(ctx)
}

// reload makes the cache match Postgres. Dropped topics (including a name
// recreated with a new id) are closed and their directories removed before
// anything is opened, so a recreated topic never sees its predecessor's log.
func (c *catalog) reload(ctx context.Context) error {
	c.reloadMu.Lock()
	defer c.reloadMu.Unlock()
	all, err := c.b.meta.LoadCatalog(ctx, c.b.cfg.NodeID)
	if err != nil {
		return err
	}
	rows := all.Topics
	brokers := newBrokerConfigs(c.b.cfg, all.BrokerNode, all.BrokerCluster)
	ids := make(map[string]int64, len(rows))
	for _, r := range rows {
		ids[r.Name] = r.ID
	}

	c.mu.Lock()
	var dropped []*topic
	for name, t := range c.byName {
		if id, ok := ids[name]; !ok || id != t.id {
			dropped = append(dropped, t)
			delete(c.byName, name)
			delete(c.byID, t.uuid)
		}
	}
	current := make(map[string]*topic, len(c.byName))
	for k, v := range c.byName {
		current[k] = v
	}
	c.mu.Unlock()

	for _, t := range dropped {
		c.b.log.Info("topic dropped", "topic", t.name)
		for _, p := range t.parts {
			p.discard()
			p.removeDir(c.b.data, c.b.log)
		}
	}

	// The partitions to open, of every topic, are opened many at once: at
	// start that is all of them, and one after another 10,000 took 11 s
	// after a clean stop and 15 s after a crash (performance.md).
	type opening struct {
		t     *topic
		index int32
		epoch int32
		p     *partition
		err   error
	}
	var (
		topics = make([]*topic, 0, len(rows))
		opens  []*opening
	)
	for _, r := range rows {
		t := &topic{id: r.ID, name: r.Name, uuid: r.UUID, configs: r.Configs, tableEngine: r.StorageEngine == "table"}
		settings := brokers.TopicSettings(r.Configs)
		t.settings = &settings
		old := current[r.Name]
		if old != nil {
			t.parts = append(t.parts, old.parts...)
		}
		topics = append(topics, t)
		for i := len(t.parts); i < len(r.Epochs); i++ {
			opens = append(opens, &opening{t: t, index: int32(i), epoch: r.Epochs[i]})
		}
	}
	// Table-engine logs are opened one at a time: each creates its
	// partition of kafgres.log_batch, and concurrent DDL on one parent
	// table fails.
	var segmentOpens []*opening
	for _, o := range opens {
		if o.t.tableEngine {
			o.p, o.err = c.openPartition(ctx, o.t, o.index, o.epoch)
		} else {
			segmentOpens = append(segmentOpens, o)
		}
	}
	inParallel(maxParallelOpens, len(segmentOpens), slices.Values(segmentOpens), func(o *opening) {
		o.p, o.err = c.openPartition(ctx, o.t, o.index, o.epoch)
	})
	failed := map[*topic]error{}
	for _, o := range opens {
		if o.err != nil && failed[o.t] == nil {
			failed[o.t] = o.err
		}
	}
	var errs []error
	next := make([]*topic, 0, len(rows))
	for _, t := range topics {
		if err := failed[t]; err != nil {
			// A log that cannot be opened (say a directory that is in
			// the way, storage.Dir.PreparePartition) keeps its topic as
			// it was — or away — but not every other topic: the rest
			// are published.
			errs = append(errs, err)
			if current[t.name] == nil {
				continue
			}
		}
		next = append(next, t)
	}
	for _, o := range opens {
		if failed[o.t] == nil {
			o.t.parts = append(o.t.parts, o.p) // opens are in index order
		} else if o.p != nil {
			o.p.close()
		}
	}

	c.mu.Lock()
	c.byName = make(map[string]*topic, len(next))
	c.byID = make(map[[16]byte]*topic, len(next))
	c.brokers = brokers
	for _, t := range next {
		// Partitions opened earlier keep pointing at the topic value they
		// were opened with; only names and ids are read through it.
		c.byName[t.name] = t
		c.byID[t.uuid] = t
	}
	c.mu.Unlock()
	c.b.applySegmentLimits(next)
	return errors.Join(errs...)
}

// brokerConfigs is the broker configuration as last loaded, nil before
// the first load; it must not be written.
func (c *catalog) brokerConfigs() *kconfig.Configs {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.brokers
}

func (c *catalog) topicByName(name string) *topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byName[name]
}

func (c *catalog) topicByID(id [16]byte) *topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.byID[id]
}

// topics returns every topic, in no particular order.
func (c *catalog) topics() []*topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*topic, 0, len(c.byName))
	for _, t := range c.byName {
		out = append(out, t)
	}
	return out
}

// lookup is topicByName, but a miss first reloads from Postgres, within
// reloadOnMiss's limits: a topic created in SQL is usable as soon as its
// transaction commits, not only once the NOTIFY has been processed, while a
// name missed again and again is answered from the catalog as it is, as a
// Kafka broker whose metadata has not caught up would (clients retry
// UNKNOWN_TOPIC_OR_PARTITION).
func (c *catalog) lookup(ctx context.Context, name string) *topic {
	if t := c.topicByName(name); t != nil {
		return t
	}
	c.reloadOnMiss(ctx, name)
	return c.topicByName(name)
}

// lookupID is topicByID with lookup's reload on a miss.
func (c *catalog) lookupID(ctx context.Context, id [16]byte) *topic {
	if t := c.topicByID(id); t != nil {
		return t
	}
	c.reloadOnMiss(ctx, string(id[:]))
	return c.topicByID(id)
}

// lookupFresh is lookup for a caller that must not take a topic created a
// moment ago for a missing one: the SQL producer, which dead-letters the
// records of a missing topic, and create, after Postgres said the topic
// exists. Its misses always reload.
func (c *catalog) lookupFresh(ctx context.Context, name string) *topic {
	if t := c.topicByName(name); t != nil {
		return t
	}
	if err := c.reload(ctx); err != nil {
		c.b.log.Warn("reload topics", "err", err)
	}
	return c.topicByName(name)
}

// reloadOnMiss reloads the catalog for a lookup of key (a name, or an id's
// bytes) that missed, within the limits above. Misses arriving together
// wait for one reload and then read what it found.
func (c *catalog) reloadOnMiss(ctx context.Context, key string) {
	asked := time.Now()
	c.missMu.Lock()
	defer c.missMu.Unlock()
	if c.lastMiss.After(asked) {
		return // a reload started after this lookup missed
	}
	if last, ok := c.missed[key]; ok && asked.Sub(last) < missReloadInterval {
		return
	}
	if wait := missReloadGap - time.Since(c.lastMiss); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	if c.missed == nil || len(c.missed) >= missedNames {
		c.missed = map[string]time.Time{}
	}
	c.lastMiss = time.Now()
	c.missed[key] = c.lastMiss
	if err := c.reload(ctx); err != nil {
		c.b.log.Warn("reload topics", "err", err)
	}
}

func (c *catalog) partition(name string, p int32) *partition {
	t := c.topicByName(name)
	if t == nil || p < 0 || int(p) >= len(t.parts) {
		return nil
	}
	return t.parts[p]
}

// create creates a topic through the SQL function (so validation lives in
// one place) and reloads. A topic created concurrently by someone else is
// not an error.
func (c *catalog) create(ctx context.Context, name string, partitions int32) (*topic, error) {
	t, err := c.createTopic(ctx, name, partitions, nil)
	var ae *apierr.Error
	if errors.As(err, &ae) && ae.Code() == kerr.TopicAlreadyExists.Code {
		// made by someone else a moment ago
		if t := c.lookupFresh(ctx, name); t != nil {
			return t, nil
		}
		return nil, apierr.New(kerr.UnknownTopicOrPartition, "topic %q was created and dropped again", name)
	}
	return t, err
}

// listen reloads the catalog whenever Postgres says topics changed, and
// after every reconnect (a notification may have been missed meanwhile).
func (c *catalog) listen(ctx context.Context) {
	c.b.meta.WatchCatalog(ctx, c.reload)
}

// close closes every partition log, many at once: each close fsyncs its
// partition's files, and a stop through the supervisor has 5 seconds
// before SIGKILL (one after another, 10,000 partitions took 16 s, and
// most logs were left without a clean-stop record).
func (c *catalog) close() (n int, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []*partition
	for _, t := range c.byName {
		parts = append(parts, t.parts...)
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	inParallel(maxParallelSyncs, len(parts), slices.Values(parts), func(p *partition) {
		if err := p.close(); err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	return len(parts), errors.Join(errs...)
}

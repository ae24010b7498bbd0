package broker

// The broker's side of the data directory (package storage): when it is
// checked against the catalog, what the catalog answers, and what is
// logged. Everything that touches files is in package storage.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kafgres/kafgres/broker/retry"
	"github.com/kafgres/kafgres/broker/storage"
	"github.com/kafgres/kafgres/broker/storage/segment"
)

// dataDirCatalog answers the data directory's questions from the metadata
// store.
type dataDirCatalog struct{ meta metadataStore }

func (c dataDirCatalog) Dropped(ctx context.Context, ms []storage.Marker) (map[storage.Marker]bool, error) {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.TopicID
	}
	rows, err := c.meta.DroppedTopics(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := map[storage.Marker]bool{}
	for _, d := range rows {
		out[storage.Marker{TopicID: d.ID, UUID: d.UUID}] = true
	}
	return out, nil
}

func (c dataDirCatalog) TopicIDSequence(ctx context.Context) (int64, error) {
	return c.meta.TopicIDSequence(ctx)
}

func markerOf(t *topic) storage.Marker { return storage.Marker{TopicID: t.id, UUID: t.uuid} }

// checkDataDir compares the data directory with the catalog before any
// partition is opened (storage.Dir.Check) and logs what was done; a
// *storage.ConflictError means the log is ahead of the catalog.
func (c *catalog) checkDataDir(ctx context.Context) error {
	all, err := c.b.meta.LoadCatalog(ctx, c.b.cfg.NodeID)
	if err != nil {
		return err
	}
	topics := make([]storage.Topic, len(all.Topics))
	for i, r := range all.Topics {
		topics[i] = storage.Topic{ID: r.ID, Name: r.Name, UUID: r.UUID, Partitions: len(r.Epochs)}
	}
	done, err := c.b.data.Check(ctx, topics, dataDirCatalog{c.b.meta})
	log := c.b.log
	for _, dir := range done.Left {
		log.Warn("leaving a directory kafgres did not create", "dir", dir, "marker", segment.MarkerFile)
	}
	for _, i := range done.Interrupted {
		if i.Err != nil {
			log.Warn("leaving an unfinished partition directory without kafgres marker", "dir", i.Dir, "err", i.Err)
			continue
		}
		log.Info("removed a partition directory left half created or half deleted", "dir", i.Dir)
	}
	for _, dir := range done.Adopted {
		log.Info("adopted a partition directory made before markers", "dir", dir)
	}
	for _, dir := range done.Removed {
		log.Info("removing log of dropped topic", "dir", dir)
	}
	return err
}

// waitDataDir runs checkDataDir until the data directory matches the
// catalog. A mismatch is the operator's to resolve, so rather than exit
// (and be restarted and fail again every second) the broker logs the
// problem and what to do, and checks again every few seconds.
func (c *catalog) waitDataDir(ctx context.Context) error {
	var last error
	err := retry.Run(ctx, retry.Policy{Min: 2 * time.Second, Max: 2 * time.Second}, func(ctx context.Context) (bool, error) {
		err := c.checkDataDir(ctx)
		if de := (*storage.ConflictError)(nil); err != nil && !errors.As(err, &de) {
			return false, retry.Permanent(err)
		}
		last = err
		return false, err
	}, func(f retry.Failure) {
		if f.Log {
			c.b.log.Error("not starting: data directory does not match the catalog", "err", f.Err.Error())
		}
	})
	if err != nil && ctx.Err() != nil && last != nil {
		return fmt.Errorf("data directory check: %w", last)
	}
	return err
}

// preparePartitionDir makes sure the directory of partition index of t is
// t's before it is opened (storage.Dir.PreparePartition) and returns it.
func (c *catalog) preparePartitionDir(ctx context.Context, t *topic, index int32) (string, error) {
	data := c.b.data
	dir := data.PartitionDir(t.name, index)
	did, err := data.PreparePartition(ctx, t.name, index, markerOf(t), dataDirCatalog{c.b.meta})
	switch did {
	case storage.PartitionAdopted:
		c.b.log.Info("adopted a partition directory made before markers", "dir", dir)
	case storage.PartitionReplacedDropped:
		c.b.log.Info("removing log of a dropped topic with the same name", "dir", dir)
	}
	return dir, err
}

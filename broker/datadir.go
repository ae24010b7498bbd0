package broker

// The data directory holds one directory per partition, and it outlives
// the catalog it was written for: a database restored from an older
// backup, or kafgres.database pointed at another database, meets a log
// that the catalog does not describe. The broker therefore deletes only
// what it can prove is its own and dead:
//
//   - Its own: every partition directory kafgres creates carries a marker
//     file (segment.MarkerFile) naming the topic id and topic UUID it was
//     made for, and gets its name only once the marker is durable. A
//     directory without a marker is never deleted.
//   - Dead: the topic was seen dropped by this running broker (catalog
//     reload), or kafgres.dropped_topic — written in the transaction that
//     deleted the topic — lists its id and UUID.
//
// A marked directory whose topic the catalog neither has nor dropped, or a
// partition the catalog's topic does not have, means the log is ahead of
// the catalog: the broker does not start (it waits, rechecking) until the
// operator restores the matching data directory or moves the listed
// directories aside. Directories of 0.2.0, made before markers, are
// adopted when their partition.metadata names the catalog's topic UUID.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/kafgres/kafgres/broker/storage/segment"

	"github.com/kafgres/kafgres/broker/metadata"
)

// dirMarker is the content of a partition directory's marker: the catalog
// identity of the topic the directory was created for.
type dirMarker struct {
	topicID int64
	uuid    [16]byte
}

func markerOf(t *topic) dirMarker { return dirMarker{topicID: t.id, uuid: t.uuid} }

func (m dirMarker) encode() []byte {
	return fmt.Appendf(nil, "version: 0\nkafgres_topic_id: %d\ntopic_uuid: %s\n", m.topicID, hex.EncodeToString(m.uuid[:]))
}

func (m dirMarker) String() string {
	return fmt.Sprintf("topic id %d (uuid %s)", m.topicID, hex.EncodeToString(m.uuid[:]))
}

func parseMarker(b []byte) (dirMarker, error) {
	var (
		m                     dirMarker
		version, id, uuidText string
	)
	for _, line := range strings.Split(string(b), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "version":
			version = strings.TrimSpace(value)
		case "kafgres_topic_id":
			id = strings.TrimSpace(value)
		case "topic_uuid":
			uuidText = strings.TrimSpace(value)
		}
	}
	if version != "0" {
		return m, fmt.Errorf("marker version %q not supported", version)
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil {
		return m, fmt.Errorf("marker topic id %q: %w", id, err)
	}
	raw, err := hex.DecodeString(uuidText)
	if err != nil || len(raw) != 16 {
		return m, fmt.Errorf("marker topic uuid %q is not 32 hex digits", uuidText)
	}
	m.topicID = n
	copy(m.uuid[:], raw)
	return m, nil
}

// readDirMarker reads dir's marker; ok is false when dir has none. An
// error matching fs.ErrNotExist means dir itself does not exist.
func readDirMarker(dir string) (m dirMarker, ok bool, err error) {
	if _, err := os.Stat(dir); err != nil {
		return m, false, err
	}
	b, err := segment.ReadMarker(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	m, err = parseMarker(b)
	if err != nil {
		return m, false, fmt.Errorf("%s: %w", filepath.Join(dir, segment.MarkerFile), err)
	}
	return m, true, nil
}

// legacyTopicUUID is the topic UUID in the partition.metadata of a
// directory made before markers existed, if it has one.
func legacyTopicUUID(dir string) ([16]byte, bool) {
	var u [16]byte
	id, err := segment.ReadPartitionMetadata(dir)
	if err != nil {
		return u, false
	}
	raw, err := hex.DecodeString(id)
	if err != nil || len(raw) != 16 {
		return u, false
	}
	copy(u[:], raw)
	return u, true
}

// dirVerdict is what to do with one directory of the data directory.
type dirVerdict int

const (
	dirKeep         dirVerdict = iota // a partition of a topic the catalog has
	dirAdopt                          // the same, made before markers: mark it
	dirRemove                         // ours and dropped (or empty): delete
	dirLeave                          // not ours and in nobody's way: leave it
	dirConflict                       // the log is ahead of the catalog: refuse
	dirCheckDropped                   // ours, topic unknown: dirRemove if dropped, else dirConflict
)

// claim is the verdict on dir, the directory of partition index of the
// topic named as want, the catalog's topic of that name (nil if none; its
// epochs count its partitions). m and marked are the directory's marker.
func claim(dir string, want *metadata.Topic, index int, m dirMarker, marked bool) (dirVerdict, string) {
	switch {
	case marked && want != nil && m.topicID == want.ID && m.uuid == want.UUID:
		if index < len(want.Epochs) {
			return dirKeep, ""
		}
		return dirConflict, fmt.Sprintf("%s is partition %d of topic %q, %s, which has only %d partitions in the catalog",
			dir, index, want.Name, m, len(want.Epochs))
	case marked:
		return dirCheckDropped, ""
	case want == nil:
		return dirLeave, ""
	}
	if u, ok := legacyTopicUUID(dir); ok && u == want.UUID {
		if index < len(want.Epochs) {
			return dirAdopt, ""
		}
		return dirConflict, fmt.Sprintf("%s is partition %d of topic %q (uuid %s), which has only %d partitions in the catalog",
			dir, index, want.Name, hex.EncodeToString(want.UUID[:]), len(want.Epochs))
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) == 0 {
		return dirRemove, "" // nothing to lose
	}
	return dirConflict, fmt.Sprintf("%s has no kafgres marker (%s) and is not a log of topic %q (uuid %s), which needs that name",
		dir, segment.MarkerFile, want.Name, hex.EncodeToString(want.UUID[:]))
}

// dropped reports which of the markers kafgres.dropped_topic lists.
func (c *catalog) dropped(ctx context.Context, ms []dirMarker) (map[dirMarker]bool, error) {
	ids := make([]int64, len(ms))
	for i, m := range ms {
		ids[i] = m.topicID
	}
	rows, err := c.b.meta.DroppedTopics(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := map[dirMarker]bool{}
	for _, d := range rows {
		out[dirMarker{topicID: d.ID, uuid: d.UUID}] = true
	}
	return out, nil
}

// dataDirError is the refusal to start: what does not match and how to
// fix it.
type dataDirError struct {
	dir      string
	problems []string
	sequence int64
}

func (e *dataDirError) Error() string {
	return fmt.Sprintf("the log in %s is ahead of the kafgres catalog (topic id sequence at %d): %s. "+
		"The database is older than its data directory (restored from a backup?), or kafgres.data_directory "+
		"belongs to another database. The broker will not delete these logs: restore the data directory that "+
		"belongs to this database, or, to discard them, move the listed directories out of %s; the broker "+
		"starts as soon as nothing conflicts",
		e.dir, e.sequence, strings.Join(e.problems, "; "), e.dir)
}

var (
	// deletingDir is a partition directory renamed for deletion
	// (partition.removeDir), as Kafka names them.
	deletingDir = regexp.MustCompile(`^.+-[0-9]+\.[0-9a-f]{32}-delete$`)
	// partitionDir is a partition directory, <topic>-<partition>.
	partitionDir = regexp.MustCompile(`^(.+)-([0-9]+)$`)
)

// checkDataDir compares the data directory with the catalog before any
// partition is opened. It removes what the catalog proves dropped and
// what was being created or deleted when the broker stopped, marks
// directories of 0.2.0 that belong to catalog topics, leaves (and logs)
// directories that are not kafgres's, and returns a *dataDirError, having
// changed nothing, when the log is ahead of the catalog.
func (c *catalog) checkDataDir(ctx context.Context) error {
	all, err := c.b.meta.LoadCatalog(ctx, c.b.cfg.NodeID)
	if err != nil {
		return err
	}
	rows := all.Topics
	byName := make(map[string]*metadata.Topic, len(rows))
	for i := range rows {
		byName[rows[i].Name] = &rows[i]
	}
	root := c.b.cfg.DataDir
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("list data directory: %w", err)
	}
	type pending struct {
		dir string
		m   dirMarker
	}
	var (
		problems        []string
		remove, adopt   []string
		unknown         []pending
		unknownMarkers  []dirMarker
		leave           []string
		adoptMarkers    = map[string]dirMarker{}
		interruptedWork []string
	)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		dir := filepath.Join(root, name)
		if strings.HasSuffix(name, ".kafgres-new") || deletingDir.MatchString(name) {
			// A creation or deletion the broker did not finish.
			interruptedWork = append(interruptedWork, dir)
			continue
		}
		mm := partitionDir.FindStringSubmatch(name)
		if mm == nil {
			continue
		}
		index, err := strconv.Atoi(mm[2])
		if err != nil {
			continue
		}
		m, marked, err := readDirMarker(dir)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		want := byName[mm[1]]
		verdict, why := claim(dir, want, index, m, marked)
		switch verdict {
		case dirAdopt:
			adopt = append(adopt, dir)
			adoptMarkers[dir] = dirMarker{topicID: want.ID, uuid: want.UUID}
		case dirRemove:
			remove = append(remove, dir)
		case dirLeave:
			leave = append(leave, dir)
		case dirConflict:
			problems = append(problems, why)
		case dirCheckDropped:
			unknown = append(unknown, pending{dir, m})
			unknownMarkers = append(unknownMarkers, m)
		}
	}
	if len(unknown) > 0 {
		dropped, err := c.dropped(ctx, unknownMarkers)
		if err != nil {
			return err
		}
		for _, u := range unknown {
			if dropped[u.m] {
				remove = append(remove, u.dir)
				continue
			}
			problems = append(problems, fmt.Sprintf("%s holds %s, which the catalog neither has nor dropped", u.dir, u.m))
		}
	}
	if len(problems) > 0 {
		seq, err := c.b.meta.TopicIDSequence(ctx)
		if err != nil {
			return err
		}
		return &dataDirError{dir: root, problems: problems, sequence: seq}
	}

	for _, dir := range leave {
		c.b.log.Warn("leaving a directory kafgres did not create", "dir", dir, "marker", segment.MarkerFile)
	}
	for _, dir := range interruptedWork {
		if err := segment.RemoveMarkedDir(dir); err != nil {
			c.b.log.Warn("leaving an unfinished partition directory without kafgres marker", "dir", dir, "err", err)
			continue
		}
		c.b.log.Info("removed a partition directory left half created or half deleted", "dir", dir)
	}
	for _, dir := range adopt {
		if err := segment.WriteMarker(dir, adoptMarkers[dir].encode(), c.b.cfg.Fsync); err != nil {
			return fmt.Errorf("adopt %s: %w", dir, err)
		}
		c.b.log.Info("adopted a partition directory made before markers", "dir", dir)
	}
	for _, dir := range remove {
		c.b.log.Info("removing log of dropped topic", "dir", dir)
		if err := segment.RemoveMarkedDir(dir); err != nil {
			return fmt.Errorf("remove log of dropped topic: %w", err)
		}
	}
	if len(remove) > 0 || len(interruptedWork) > 0 || len(adopt) > 0 {
		if c.b.cfg.Fsync {
			if err := segment.SyncDir(root); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitDataDir runs checkDataDir until the data directory matches the
// catalog. A mismatch is the operator's to resolve, so rather than exit
// (and be restarted and fail again every second) the broker logs the
// problem and what to do, and checks again every few seconds.
func (c *catalog) waitDataDir(ctx context.Context) error {
	var logged string
	for {
		err := c.checkDataDir(ctx)
		var de *dataDirError
		if !errors.As(err, &de) {
			return err
		}
		if msg := de.Error(); msg != logged {
			c.b.log.Error("not starting: data directory does not match the catalog", "err", msg)
			logged = msg
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("data directory check: %w", err)
		case <-time.After(2 * time.Second):
		}
	}
}

// preparePartitionDir makes sure the directory of partition index of t is
// t's before it is opened: created (with its marker, durably) when
// missing, adopted when it predates markers, replaced when it is left
// from a topic kafgres.dropped_topic lists. Anything else is an error and
// nothing is deleted.
func (c *catalog) preparePartitionDir(ctx context.Context, t *topic, index int32, dir string) error {
	m, marked, err := readDirMarker(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return segment.CreateDir(dir, markerOf(t).encode(), c.b.cfg.Fsync)
	}
	if err != nil {
		return err
	}
	want := &metadata.Topic{ID: t.id, Name: t.name, UUID: t.uuid, Epochs: make([]int32, index+1)}
	verdict, why := claim(dir, want, int(index), m, marked)
	switch verdict {
	case dirKeep:
		return nil
	case dirAdopt:
		c.b.log.Info("adopted a partition directory made before markers", "dir", dir)
		return segment.WriteMarker(dir, markerOf(t).encode(), c.b.cfg.Fsync)
	case dirRemove:
		if err := segment.RemoveMarkedDir(dir); err != nil {
			return err
		}
		return segment.CreateDir(dir, markerOf(t).encode(), c.b.cfg.Fsync)
	case dirCheckDropped:
		dropped, err := c.dropped(ctx, []dirMarker{m})
		if err != nil {
			return err
		}
		if !dropped[m] {
			return fmt.Errorf("%s holds %s, which the catalog neither has nor dropped; move it out of the data directory to let topic %q use the name", dir, m, t.name)
		}
		c.b.log.Info("removing log of a dropped topic with the same name", "dir", dir)
		if err := segment.RemoveMarkedDir(dir); err != nil {
			return err
		}
		return segment.CreateDir(dir, markerOf(t).encode(), c.b.cfg.Fsync)
	default:
		return errors.New(why)
	}
}

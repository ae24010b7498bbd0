package storage

import (
	"context"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Topic is what the data directory needs to know of a topic the catalog
// has.
type Topic struct {
	ID         int64
	Name       string
	UUID       [16]byte
	Partitions int
}

// Catalog answers what the data directory cannot know by itself.
type Catalog interface {
	// Dropped reports which of the topics the catalog records as dropped
	// (kafgres.dropped_topic).
	Dropped(ctx context.Context, topics []Marker) (map[Marker]bool, error)
	// TopicIDSequence is the last topic id the catalog handed out, which
	// tells a data directory from another cluster's or from the future.
	TopicIDSequence(ctx context.Context) (int64, error)
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
// topic named as want, the catalog's topic of that name (nil if none). m
// and marked are the directory's marker.
func claim(fsys vfs.FS, dir string, want *Topic, index int, m Marker, marked bool) (dirVerdict, string) {
	switch {
	case marked && want != nil && m.TopicID == want.ID && m.UUID == want.UUID:
		if index < want.Partitions {
			return dirKeep, ""
		}
		return dirConflict, fmt.Sprintf("%s is partition %d of topic %q, %s, which has only %d partitions in the catalog",
			dir, index, want.Name, m, want.Partitions)
	case marked:
		return dirCheckDropped, ""
	case want == nil:
		return dirLeave, ""
	}
	if u, ok := legacyTopicUUID(fsys, dir); ok && u == want.UUID {
		if index < want.Partitions {
			return dirAdopt, ""
		}
		return dirConflict, fmt.Sprintf("%s is partition %d of topic %q (uuid %s), which has only %d partitions in the catalog",
			dir, index, want.Name, hex.EncodeToString(want.UUID[:]), want.Partitions)
	}
	if entries, err := fsys.ReadDir(dir); err == nil && len(entries) == 0 {
		return dirRemove, "" // nothing to lose
	}
	return dirConflict, fmt.Sprintf("%s has no kafgres marker (%s) and is not a log of topic %q (uuid %s), which needs that name",
		dir, segment.MarkerFile, want.Name, hex.EncodeToString(want.UUID[:]))
}

// ConflictError is Check's refusal: the log is ahead of the catalog. It
// says what does not match and how to fix it.
type ConflictError struct {
	Dir      string
	Problems []string
	Sequence int64 // the catalog's topic id sequence
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("the log in %s is ahead of the kafgres catalog (topic id sequence at %d): %s. "+
		"The database is older than its data directory (restored from a backup?), or kafgres.data_directory "+
		"belongs to another database. The broker will not delete these logs: restore the data directory that "+
		"belongs to this database, or, to discard them, move the listed directories out of %s; the broker "+
		"starts as soon as nothing conflicts",
		e.Dir, e.Sequence, strings.Join(e.Problems, "; "), e.Dir)
}

// Swept is what Check did, directory paths in the order it got to them.
type Swept struct {
	Left        []string      // not kafgres's and in nobody's way: left alone
	Interrupted []Interrupted // left half created or half deleted
	Adopted     []string      // made before markers for a catalog topic: marked
	Removed     []string      // logs of dropped topics: removed
}

// Interrupted is a partition directory whose creation or deletion the
// broker did not finish. Check removes it unless it has no kafgres marker:
// then it is left, and Err says why.
type Interrupted struct {
	Dir string
	Err error
}

var (
	// deletingDir is a partition directory renamed for deletion
	// (RemovePartition), as Kafka names them.
	deletingDir = regexp.MustCompile(`^.+-[0-9]+\.[0-9a-f]{32}-delete$`)
	// partitionDir is a partition directory, <topic>-<partition>.
	partitionDir = regexp.MustCompile(`^(.+)-([0-9]+)$`)
)

// Check compares the data directory with topics, the catalog's, before
// any partition is opened. It removes what cat proves dropped and what
// was being created or deleted when the broker stopped, marks directories
// of 0.2.0 that belong to catalog topics, and leaves directories that are
// not kafgres's; Swept says which. When the log is ahead of the catalog
// it returns a *ConflictError, having changed nothing. On any other error
// Swept is what was done before it.
func (d *Dir) Check(ctx context.Context, topics []Topic, cat Catalog) (Swept, error) {
	var done Swept
	byName := make(map[string]*Topic, len(topics))
	for i := range topics {
		byName[topics[i].Name] = &topics[i]
	}
	entries, err := d.fsys.ReadDir(d.root)
	if err != nil {
		return done, fmt.Errorf("list data directory: %w", err)
	}
	type pending struct {
		dir string
		m   Marker
	}
	var (
		problems        []string
		remove, adopt   []string
		unknown         []pending
		unknownMarkers  []Marker
		leave           []string
		adoptMarkers    = map[string]Marker{}
		interruptedWork []string
	)
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		dir := filepath.Join(d.root, name)
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
		m, marked, err := readDirMarker(d.fsys, dir)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", dir, err))
			continue
		}
		want := byName[mm[1]]
		verdict, why := claim(d.fsys, dir, want, index, m, marked)
		switch verdict {
		case dirAdopt:
			adopt = append(adopt, dir)
			adoptMarkers[dir] = Marker{TopicID: want.ID, UUID: want.UUID}
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
		dropped, err := cat.Dropped(ctx, unknownMarkers)
		if err != nil {
			return done, err
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
		seq, err := cat.TopicIDSequence(ctx)
		if err != nil {
			return done, err
		}
		return done, &ConflictError{Dir: d.root, Problems: problems, Sequence: seq}
	}

	done.Left = leave
	for _, dir := range interruptedWork {
		done.Interrupted = append(done.Interrupted, Interrupted{Dir: dir, Err: segment.RemoveMarkedDir(d.fsys, dir)})
	}
	for _, dir := range adopt {
		if err := segment.WriteMarker(d.fsys, dir, adoptMarkers[dir].encode(), d.fsync); err != nil {
			return done, fmt.Errorf("adopt %s: %w", dir, err)
		}
		done.Adopted = append(done.Adopted, dir)
	}
	for _, dir := range remove {
		if err := segment.RemoveMarkedDir(d.fsys, dir); err != nil {
			return done, fmt.Errorf("remove log of dropped topic: %w", err)
		}
		done.Removed = append(done.Removed, dir)
	}
	if len(remove) > 0 || len(interruptedWork) > 0 || len(adopt) > 0 {
		if d.fsync {
			if err := segment.SyncDir(d.fsys, d.root); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

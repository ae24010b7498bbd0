package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Restore rebuilds one partition's log from a segment archive: the files
// kafgres.segment_archive_command received, gathered in one directory
// under their %f names (<topic>-<partition>-<20-digit base><ext>). It is
// the restore half of archiving (docs/operations.md), run by
// `kafgres-broker restore` while the broker is stopped.
type Restore struct {
	ArchiveDir string // where the archived files are
	DataDir    string // kafgres.data_directory to restore into
	Topic      string
	Partition  int32
	// TopicUUID is the catalog's topic_uuid of the topic the log is
	// restored for (hex, dashes allowed). It goes into partition.metadata,
	// by which the broker adopts the directory as that topic's.
	TopicUUID string
	Fsync     bool
}

// Restored is what Restore rebuilt.
type Restored struct {
	Dir        string
	Segments   int   // segments copied from the archive
	Start, End int64 // the restored log's offsets
	Skipped    []int64
}

var archivedExt = regexp.MustCompile(`^([0-9]{20})(\.log|\.index|\.timeindex|\.txnindex)$`)

// RestorePartition copies the archived segments of r.Topic-r.Partition
// into a new partition directory, made aside (<dir>.restoring) and renamed
// into place only once the copied log opened (recovered) cleanly. The
// directory must not exist. The last segment is sealed and the archive
// progress set past it, so the broker neither appends to nor archives
// again a segment the archive already holds. A base whose .log is missing
// (its indexes were archived, the log not yet) is skipped, with the
// segments after it: a restored log never has a hole.
func RestorePartition(r Restore) (Restored, error) {
	uuid := strings.ReplaceAll(strings.ToLower(r.TopicUUID), "-", "")
	if len(uuid) != 32 || strings.Trim(uuid, "0123456789abcdef") != "" {
		return Restored{}, fmt.Errorf("restore: topic uuid %q is not a UUID", r.TopicUUID)
	}
	d, err := Open(r.DataDir, r.Fsync)
	if err != nil {
		return Restored{}, fmt.Errorf("restore: %w", err)
	}
	dir := d.PartitionDir(r.Topic, r.Partition)
	out := Restored{Dir: dir}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		return out, fmt.Errorf("restore: %s exists; move it out of the data directory first", dir)
	}
	files, err := archivedSegments(r.ArchiveDir, fmt.Sprintf("%s-%d-", r.Topic, r.Partition))
	if err != nil {
		return out, err
	}
	var bases []int64
	for base := range files {
		bases = append(bases, base)
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	for i, base := range bases {
		if _, ok := files[base][".log"]; !ok {
			out.Skipped = bases[i:]
			bases = bases[:i]
			break
		}
	}
	if len(bases) == 0 {
		return out, fmt.Errorf("restore: no archived segment of %s-%d in %s", r.Topic, r.Partition, r.ArchiveDir)
	}
	tmp := dir + ".restoring"
	if err := os.RemoveAll(tmp); err != nil {
		return out, fmt.Errorf("restore: %w", err)
	}
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return out, fmt.Errorf("restore: %w", err)
	}
	for _, base := range bases {
		for ext, src := range files[base] {
			if err := copyFile(src, filepath.Join(tmp, fmt.Sprintf("%020d%s", base, ext)), r.Fsync); err != nil {
				return out, fmt.Errorf("restore: %w", err)
			}
		}
	}
	out.Segments = len(bases)
	l, err := segment.Open(segment.Options{Dir: tmp, TopicID: uuid, Fsync: r.Fsync})
	if err != nil {
		return out, fmt.Errorf("restore: the archived log does not open: %w", err)
	}
	err = l.Roll()
	out.Start, out.End = l.LogStartOffset(), l.LogEndOffset()
	if err == nil {
		err = segment.WriteArchiveProgress(vfs.OS, tmp, out.End, r.Fsync)
	}
	if cerr := l.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return out, fmt.Errorf("restore: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return out, fmt.Errorf("restore: %w", err)
	}
	if r.Fsync {
		if err := segment.SyncDir(vfs.OS, r.DataDir); err != nil {
			return out, fmt.Errorf("restore: %w", err)
		}
	}
	return out, nil
}

// archivedSegments lists the archived files of the partition whose %f
// names start with prefix: base offset → extension → path.
func archivedSegments(archiveDir, prefix string) (map[int64]map[string]string, error) {
	entries, err := os.ReadDir(archiveDir)
	if err != nil {
		return nil, fmt.Errorf("restore: read archive: %w", err)
	}
	out := map[int64]map[string]string{}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		m := archivedExt.FindStringSubmatch(rest)
		if m == nil {
			continue
		}
		base, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil {
			continue
		}
		if out[base] == nil {
			out[base] = map[string]string{}
		}
		out[base][m[2]] = filepath.Join(archiveDir, e.Name())
	}
	return out, nil
}

func copyFile(src, dst string, fsync bool) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil && fsync {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

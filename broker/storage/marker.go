package storage

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kafgres/kafgres/broker/storage/segment"
	"github.com/kafgres/kafgres/broker/storage/vfs"
)

// Marker is the content of a partition directory's marker: the catalog
// identity of the topic the directory was created for.
type Marker struct {
	TopicID int64
	UUID    [16]byte
}

func (m Marker) encode() []byte {
	return fmt.Appendf(nil, "version: 0\nkafgres_topic_id: %d\ntopic_uuid: %s\n", m.TopicID, hex.EncodeToString(m.UUID[:]))
}

func (m Marker) String() string {
	return fmt.Sprintf("topic id %d (uuid %s)", m.TopicID, hex.EncodeToString(m.UUID[:]))
}

func parseMarker(b []byte) (Marker, error) {
	var (
		m                     Marker
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
	m.TopicID = n
	copy(m.UUID[:], raw)
	return m, nil
}

// readDirMarker reads dir's marker; ok is false when dir has none. An
// error matching fs.ErrNotExist means dir itself does not exist.
func readDirMarker(fsys vfs.FS, dir string) (m Marker, ok bool, err error) {
	if _, err := fsys.Stat(dir); err != nil {
		return m, false, err
	}
	b, err := segment.ReadMarker(fsys, dir)
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
func legacyTopicUUID(fsys vfs.FS, dir string) ([16]byte, bool) {
	var u [16]byte
	id, err := segment.ReadPartitionMetadata(fsys, dir)
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

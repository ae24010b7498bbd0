package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	metadataFile = "partition.metadata"
	metadataTmp  = metadataFile + ".tmp"
)

// ReadPartitionMetadata returns the topic id recorded in dir's
// partition.metadata. A missing file yields an error matching fs.ErrNotExist.
func ReadPartitionMetadata(dir string) (string, error) {
	path := filepath.Join(dir, metadataFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read partition metadata: %w", err)
	}
	var version, topicID string
	var haveVersion, haveTopicID bool
	for _, line := range strings.Split(string(b), "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "version":
			version, haveVersion = strings.TrimSpace(value), true
		case "topic_id":
			topicID, haveTopicID = strings.TrimSpace(value), true
		}
	}
	if !haveVersion || version != "0" {
		return "", fmt.Errorf("read partition metadata %s: unsupported version %q", path, version)
	}
	if !haveTopicID || topicID == "" {
		return "", fmt.Errorf("read partition metadata %s: no topic_id", path)
	}
	return topicID, nil
}

// writePartitionMetadata writes the file atomically: a torn file would make
// the next start refuse the directory.
func writePartitionMetadata(dir, topicID string, fsync bool) error {
	data := fmt.Sprintf("version: 0\ntopic_id: %s\n", topicID)
	if err := writeFileAtomic(dir, metadataFile, []byte(data), fsync); err != nil {
		return fmt.Errorf("write partition metadata: %w", err)
	}
	return nil
}

// writeFileAtomic replaces dir/name with data through dir/name.tmp, so that
// a crash leaves the old file or the new one, never a torn one; with fsync
// the new file is durable when it returns. Recovery removes a left-over
// temporary file.
func writeFileAtomic(dir, name string, data []byte, fsync bool) error {
	tmp := filepath.Join(dir, name+".tmp")
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil && fsync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	if fsync {
		return syncDir(dir)
	}
	return nil
}

package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kafgres/kafgres/broker/storage"
)

// restore is `kafgres-broker restore`: rebuild a partition's log from the
// segment archive into the data directory (docs/operations.md), with the
// broker stopped.
func restore(args []string) error {
	fs := flag.NewFlagSet("restore", flag.ContinueOnError)
	var r storage.Restore
	var partition int
	fs.StringVar(&r.ArchiveDir, "archive", "", "directory holding the archived segment files, under their %f names")
	fs.StringVar(&r.DataDir, "data-dir", "", "kafgres.data_directory to restore into")
	fs.StringVar(&r.Topic, "topic", "", "topic name")
	fs.IntVar(&partition, "partition", 0, "partition")
	fs.StringVar(&r.TopicUUID, "topic-uuid", "", "the catalog's topic_uuid of the topic (SELECT topic_uuid FROM kafgres.topic WHERE name = ...)")
	fs.BoolVar(&r.Fsync, "fsync", true, "fsync the restored files")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if r.ArchiveDir == "" || r.DataDir == "" || r.Topic == "" || r.TopicUUID == "" {
		fs.Usage()
		return fmt.Errorf("--archive, --data-dir, --topic and --topic-uuid are required")
	}
	r.Partition = int32(partition)
	out, err := storage.RestorePartition(r)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stdout, "restored %d segments into %s: offsets [%d, %d)\n", out.Segments, out.Dir, out.Start, out.End)
	if len(out.Skipped) > 0 {
		fmt.Fprintf(os.Stdout, "not restored (no archived .log at %d, and after it): %v\n", out.Skipped[0], out.Skipped)
	}
	return nil
}

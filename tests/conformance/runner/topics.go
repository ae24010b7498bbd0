package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicSpec is one topic to create before the clients run.
type TopicSpec struct {
	Name       string
	Partitions int
}

// CreateReferenceTopics creates topics on the reference broker with the
// Java Admin client (the Java conformance client's --create-topics mode),
// so the reference side is prepared by Kafka's own client.
func CreateReferenceTopics(ctx context.Context, repo, cache, addr string, topics []TopicSpec) error {
	if len(topics) == 0 {
		return nil
	}
	specs := make([]string, len(topics))
	for i, t := range topics {
		specs[i] = fmt.Sprintf("%s:%d", t.Name, t.Partitions)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repo, "tests", "conformance", "clients", "java", "run"),
		"--bootstrap", addr, "--create-topics", strings.Join(specs, ","))
	cmd.Env = append(cmd.Environ(), "CONFORMANCE_CACHE="+cache)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("create topics on the reference broker with the Java Admin client: %w\n%s", err, out)
	}
	return nil
}

// ClusterInfo is what a Metadata request for all topics says: the values
// that differ between two clusters by construction.
type ClusterInfo struct {
	ClusterID string
	TopicIDs  map[string]string // topic name -> id, as Kafka prints it (base64)
	Parts     map[string]int
}

// Describe asks the broker at addr for its metadata.
// opts are added to the client's (the secure pair's admin credentials).
func Describe(ctx context.Context, addr string, opts ...kgo.Opt) (*ClusterInfo, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata from %s: %w", addr, err)
	}
	info := &ClusterInfo{TopicIDs: map[string]string{}, Parts: map[string]int{}}
	if resp.ClusterID != nil {
		info.ClusterID = *resp.ClusterID
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || t.ErrorCode != 0 {
			continue
		}
		info.Parts[*t.Topic] = len(t.Partitions)
		if t.TopicID != [16]byte{} {
			info.TopicIDs[*t.Topic] = kafkaUUID(t.TopicID)
		}
	}
	return info, nil
}

// WaitTopics waits until the broker serves every topic with its partition
// count: topic creation on both brokers is asynchronous to metadata.
func WaitTopics(ctx context.Context, addr string, topics []TopicSpec, opts ...kgo.Opt) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		info, err := Describe(ctx, addr, opts...)
		missing := ""
		if err == nil {
			for _, t := range topics {
				if info.Parts[t.Name] != t.Partitions {
					missing = t.Name
					break
				}
			}
			if missing == "" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return fmt.Errorf("%s does not serve topic %s after 60 s", addr, missing)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// kafkaUUID formats a UUID the way Kafka's Uuid.toString does.
func kafkaUUID(b [16]byte) string {
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// uuidForms lists the spellings a client may print an id in: Kafka's
// base64, and the usual 8-4-4-4-12 hex.
func uuidForms(id string) []string {
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil || len(b) != 16 {
		return []string{id}
	}
	h := hex.EncodeToString(b)
	dashed := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	return []string{id, h, dashed, string(bytes.ToUpper([]byte(dashed)))}
}

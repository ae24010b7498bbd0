package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestBrokenHandlerFailsGate shows that the gate catches a broker bug: a
// proxy in front of kafgres turns UNKNOWN_TOPIC_OR_PARTITION in Metadata
// and ListOffsets responses into TOPIC_AUTHORIZATION_FAILED, as a broken
// handler would, and the unknown-topic scenarios must then fail against
// the real reference broker. With the proxy passing responses through
// unchanged the same scenarios must pass, so the failure is the rewrite's.
//
// It needs what the gate needs: java, Maven (Central, or a warm ~/.m2),
// and kafgres installed (`make install`). Without them it skips.
func TestBrokenHandlerFailsGate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a reference Kafka broker and a kafgres cluster")
	}
	for _, tool := range []string{"java", "javac", "mvn", "pg_config"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: the reference broker cannot be provisioned", tool)
		}
	}
	bindir, err := exec.Command("pg_config", "--bindir").Output()
	if err != nil {
		t.Skipf("pg_config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(bindir)), "kafgres-broker")); err != nil {
		t.Skip("kafgres is not installed (make install)")
	}
	repo, err := findRepo()
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(repo, "tests", "conformance", ".work", "cache")
	if _, err := Classpath(repo, cache); err != nil {
		t.Skipf("the reference broker cannot be provisioned: %v", err)
	}

	// not t.TempDir(): its parent is 0700, and Postgres runs as "postgres"
	work, err := os.MkdirTemp("", "kafgres-conformance-selftest-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(work, 0o755)
	t.Cleanup(func() {
		if !t.Failed() {
			os.RemoveAll(work)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var ref *Reference
	var kaf *Kafgres
	var refErr, kafErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		ref, refErr = StartReference(ctx, repo, cache, filepath.Join(work, "reference"))
	}()
	go func() { defer wg.Done(); kaf, kafErr = StartKafgres(ctx, repo, filepath.Join(work, "kafgres"), "") }()
	wg.Wait()
	if ref != nil {
		t.Cleanup(func() { ref.Stop() })
	}
	if kaf != nil {
		t.Cleanup(func() { kaf.Stop() })
	}
	if refErr != nil {
		t.Fatalf("reference broker: %v", refErr)
	}
	if kafErr != nil {
		t.Fatalf("kafgres: %v", kafErr)
	}

	proxy := startProxy(t, kaf.Addr())
	all, err := LoadScenarios(filepath.Join(repo, "tests", "conformance", "scenarios.json"))
	if err != nil {
		t.Fatal(err)
	}
	var scenarios []Scenario
	for _, s := range all {
		if strings.HasPrefix(s.Name, "unknown-topic-") {
			scenarios = append(scenarios, s)
		}
	}
	cat, err := LoadCatalogue(filepath.Join(repo, "docs", "conformance.md"))
	if err != nil {
		t.Fatal(err)
	}
	logs := filepath.Join(work, "logs")
	os.MkdirAll(logs, 0o755)

	run := func(broken bool) (*Result, string) {
		proxy.broken.Store(broken)
		var out bytes.Buffer
		g := &Gate{
			Repo: repo, Cache: cache, LogDir: logs, Clients: []string{"java"},
			Scenarios: scenarios, Catalogue: cat, Parallel: 1, Out: &out, Log: io.Discard,
		}
		res, err := g.Run(ctx,
			Broker{Name: "reference", Addr: ref.Addr(), CreateTopics: func(ctx context.Context, ts []TopicSpec) error {
				return CreateReferenceTopics(ctx, repo, cache, ref.Addr(), ts)
			}},
			Broker{Name: "kafgres", Addr: proxy.addr, CreateTopics: kaf.CreateTopics})
		if err != nil {
			t.Fatalf("gate: %v", err)
		}
		g.Report(res)
		return res, out.String()
	}

	res, out := run(false)
	if res.ExitCode() != 0 || res.Passed != len(scenarios) {
		t.Fatalf("through an honest proxy the gate should pass:\n%s", out)
	}
	res, out = run(true)
	t.Logf("gate output with the broken handler:\n%s", out)
	if res.ExitCode() == 0 {
		t.Fatal("the gate passed although kafgres answered with the wrong error code")
	}
	if res.Failed != len(scenarios) {
		t.Errorf("want %d failed cells, got %d", len(scenarios), res.Failed)
	}
	if !strings.Contains(out, "TOPIC_AUTHORIZATION_FAILED") || !strings.Contains(out, "0 passed, 2 failed") {
		t.Errorf("report does not show the difference:\n%s", out)
	}
}

// proxy forwards Kafka connections to upstream. It points the brokers in
// Metadata responses at itself (else clients would bypass it after
// bootstrap) and, while broken, rewrites UNKNOWN_TOPIC_OR_PARTITION.
type proxy struct {
	addr     string
	upstream string
	broken   atomic.Bool
}

func startProxy(t *testing.T, upstream string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &proxy{addr: ln.Addr().String(), upstream: upstream}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

type reqInfo struct{ key, version int16 }

func (p *proxy) serve(client net.Conn) {
	defer client.Close()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	var mu sync.Mutex
	inflight := map[int32]reqInfo{}
	go func() {
		defer up.Close()
		for {
			frame, err := readFrame(client)
			if err != nil || len(frame) < 8 {
				return
			}
			mu.Lock()
			inflight[int32(binary.BigEndian.Uint32(frame[4:8]))] = reqInfo{
				key: int16(binary.BigEndian.Uint16(frame[0:2])), version: int16(binary.BigEndian.Uint16(frame[2:4]))}
			mu.Unlock()
			if writeFrame(up, frame) != nil {
				return
			}
		}
	}()
	for {
		frame, err := readFrame(up)
		if err != nil || len(frame) < 4 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(frame[0:4]))
		mu.Lock()
		info, ok := inflight[corr]
		delete(inflight, corr)
		mu.Unlock()
		if ok {
			frame = p.rewrite(info, frame)
		}
		if writeFrame(client, frame) != nil {
			return
		}
	}
}

// rewrite decodes a Metadata, ListOffsets or DescribeTopicPartitions (what
// the Java Admin describes topics with) response with kmsg, changes it and
// encodes it again; anything it does not understand passes unchanged.
func (p *proxy) rewrite(info reqInfo, frame []byte) []byte {
	if info.key != 3 && info.key != 2 && info.key != 75 {
		return frame
	}
	req := kmsg.RequestForKey(info.key)
	req.SetVersion(info.version)
	header := 4 // correlation id
	if req.IsFlexible() {
		// response header v1: tagged fields, which brokers leave empty
		if len(frame) < 5 || frame[4] != 0 {
			return frame
		}
		header = 5
	}
	resp := req.ResponseKind()
	resp.SetVersion(info.version)
	if err := resp.ReadFrom(frame[header:]); err != nil {
		return frame
	}
	const unknown, replacement = 3, 29 // UNKNOWN_TOPIC_OR_PARTITION -> TOPIC_AUTHORIZATION_FAILED
	broken := p.broken.Load()
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		_, port, _ := net.SplitHostPort(p.addr)
		n, _ := strconv.Atoi(port)
		for i := range r.Brokers {
			r.Brokers[i].Host, r.Brokers[i].Port = "127.0.0.1", int32(n)
		}
		for i := range r.Topics {
			if broken && r.Topics[i].ErrorCode == unknown {
				r.Topics[i].ErrorCode = replacement
			}
		}
	case *kmsg.DescribeTopicPartitionsResponse:
		for i := range r.Topics {
			if broken && r.Topics[i].ErrorCode == unknown {
				r.Topics[i].ErrorCode = replacement
			}
		}
	case *kmsg.ListOffsetsResponse:
		for i := range r.Topics {
			for j := range r.Topics[i].Partitions {
				if broken && r.Topics[i].Partitions[j].ErrorCode == unknown {
					r.Topics[i].Partitions[j].ErrorCode = replacement
				}
			}
		}
	}
	return resp.AppendTo(append([]byte(nil), frame[:header]...))
}

func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(r, buf)
	return buf, err
}

func writeFrame(w io.Writer, frame []byte) error {
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(frame)), uint32(len(frame)))
	_, err := w.Write(append(buf, frame...))
	return err
}

package broker

import (
	"bufio"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every served range must be one kmsg can encode and one Apache Kafka 4.4
// serves (tests/reference/apiversions-4.4.0.txt was captured from the
// reference broker with kafka-broker-api-versions).
func TestAPITableMatchesKafka(t *testing.T) {
	ref := readReference(t)
	seen := map[int16]bool{}
	for _, a := range servedAPIs() {
		if seen[a.key] {
			t.Fatalf("key %d listed twice", a.key)
		}
		seen[a.key] = true
		if a.handle == nil {
			t.Fatalf("key %d has no handler", a.key)
		}
		req := kmsg.RequestForKey(a.key)
		if req == nil || a.max > req.MaxVersion() {
			t.Fatalf("key %d: max %d beyond kmsg", a.key, a.max)
		}
		r, ok := ref[a.key]
		if !ok {
			t.Fatalf("key %d not served by Kafka 4.4", a.key)
		}
		if a.min != r[0] || a.max != r[1] {
			t.Errorf("key %d: we serve v%d-%d, Kafka 4.4 serves v%d-%d", a.key, a.min, a.max, r[0], r[1])
		}
	}
}

func readReference(t *testing.T) map[int16][2]int16 {
	f, err := os.Open("../tests/reference/apiversions-4.4.0.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line := regexp.MustCompile(`\((\d+)\): (\d+)(?: to (\d+))?`)
	out := map[int16][2]int16{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		key, _ := strconv.Atoi(m[1])
		lo, _ := strconv.Atoi(m[2])
		hi := lo
		if m[3] != "" {
			hi, _ = strconv.Atoi(m[3])
		}
		out[int16(key)] = [2]int16{int16(lo), int16(hi)}
	}
	return out
}

func TestAPIVersionsAdvertisesTable(t *testing.T) {
	b := &Broker{apis: servedAPIs()}
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "franz-go", "1.0"
	resp, err := handleApiVersions(nil, b, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	keys := resp.(*kmsg.ApiVersionsResponse).ApiKeys
	if len(keys) != len(b.apis) {
		t.Fatalf("advertised %d keys, table has %d", len(keys), len(b.apis))
	}
	for i, k := range keys {
		if a := b.apis[i]; k.ApiKey != a.key || k.MinVersion != a.min || k.MaxVersion != a.max {
			t.Fatalf("entry %d: %+v vs %+v", i, k, a)
		}
	}

	req.ClientSoftwareName = "-bad name"
	resp, _ = handleApiVersions(nil, b, nil, req)
	if resp.(*kmsg.ApiVersionsResponse).ErrorCode != 42 {
		t.Fatal("invalid software name accepted")
	}

	un := b.apiVersionsUnsupported().(*kmsg.ApiVersionsResponse)
	if un.Version != 0 || un.ErrorCode != 35 || len(un.ApiKeys) != 1 || un.ApiKeys[0].ApiKey != 18 {
		t.Fatalf("unsupported-version answer: %+v", un)
	}
}

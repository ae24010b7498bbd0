package producer

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Vectors from Kafka's UtilsTest.testMurmur2.
func TestMurmur2KafkaVectors(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// The partition must match what a Kafka-compatible client computes.
func TestKeyPartitionMatchesKafkaClients(t *testing.T) {
	p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := 0; i < 1000; i++ {
		key := []byte(fmt.Sprintf("order-%d", i))
		for _, n := range []int32{1, 3, 7, 64} {
			want := int32(p.Partition(&kgo.Record{Key: key}, int(n)))
			if got := keyPartition(key, n); got != want {
				t.Fatalf("key %q over %d partitions: %d, franz-go says %d", key, n, got, want)
			}
		}
	}
}

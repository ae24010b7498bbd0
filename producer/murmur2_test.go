package producer

import "testing"

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

// The partition must match what a Kafka-compatible client computes. The
// table was produced once by franz-go's kgo.StickyKeyPartitioner (which
// implements Kafka's default keyed partitioning) so that the product module
// need not depend on a client library just for this check. It covers every
// tail length of the hash (0-3 trailing bytes), bytes >= 0x80 (Java hashes
// signed bytes) and multi-byte UTF-8.
func TestKeyPartitionMatchesKafkaClients(t *testing.T) {
	partitionCounts := [3]int32{3, 7, 64}
	cases := []struct {
		key  string
		want [3]int32
	}{
		{"", [3]int32{0, 2, 25}},
		{"a", [3]int32{1, 5, 60}},
		{"ab", [3]int32{2, 0, 42}},
		{"abc", [3]int32{0, 4, 27}},
		{"abcd", [3]int32{2, 5, 52}},
		{"abcde", [3]int32{1, 4, 29}},
		{"abcdef", [3]int32{0, 5, 60}},
		{"abcdefg", [3]int32{1, 4, 25}},
		{"\xff", [3]int32{0, 5, 27}},
		{"\xff\xfe\x80", [3]int32{0, 3, 3}},
		{"\x80\x81\x82\x83\x84", [3]int32{0, 4, 25}},
		{"ключ", [3]int32{2, 4, 48}},
		{"日本語キー", [3]int32{1, 4, 30}},
		{"order-0", [3]int32{1, 4, 12}},
		{"order-37", [3]int32{1, 5, 27}},
		{"order-74", [3]int32{0, 1, 4}},
		{"order-111", [3]int32{2, 2, 42}},
		{"order-148", [3]int32{0, 5, 53}},
		{"order-185", [3]int32{1, 0, 51}},
		{"order-222", [3]int32{0, 1, 57}},
		{"order-259", [3]int32{0, 5, 61}},
		{"order-296", [3]int32{1, 3, 40}},
		{"order-333", [3]int32{2, 1, 63}},
		{"order-370", [3]int32{0, 1, 4}},
		{"order-407", [3]int32{1, 1, 12}},
		{"order-444", [3]int32{0, 5, 63}},
		{"order-481", [3]int32{1, 0, 39}},
		{"order-518", [3]int32{1, 3, 8}},
		{"order-555", [3]int32{1, 5, 5}},
		{"order-592", [3]int32{0, 0, 23}},
		{"order-629", [3]int32{2, 6, 55}},
		{"order-666", [3]int32{0, 4, 44}},
		{"order-703", [3]int32{1, 2, 50}},
		{"order-740", [3]int32{2, 0, 14}},
		{"order-777", [3]int32{2, 0, 57}},
		{"order-814", [3]int32{2, 0, 0}},
		{"order-851", [3]int32{2, 3, 60}},
		{"order-888", [3]int32{1, 0, 4}},
		{"order-925", [3]int32{1, 5, 47}},
		{"order-962", [3]int32{2, 2, 54}},
		{"order-999", [3]int32{2, 1, 26}},
	}
	for _, c := range cases {
		for i, n := range partitionCounts {
			if got := keyPartition([]byte(c.key), n); got != c.want[i] {
				t.Errorf("key %q over %d partitions: %d, franz-go says %d", c.key, n, got, c.want[i])
			}
		}
	}
}

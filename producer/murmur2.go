package producer

// murmur2 is the 32-bit MurmurHash2 variant Kafka's Java client uses to
// place keyed records (Utils.murmur2 with seed 0x9747b28c). Records that
// kafgres_produce and CDC mappings key must land where a Java, librdkafka
// (murmur2 partitioner) or franz-go producer would put the same key.
func murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// keyPartition is Kafka's default partition for a non-null key:
// toPositive(murmur2(key)) % partitions.
func keyPartition(key []byte, partitions int32) int32 {
	return int32(uint32(murmur2(key))&0x7fffffff) % partitions
}

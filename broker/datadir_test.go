package broker

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/kafgres/kafgres/broker/metadata"
)

func TestDirMarkerRoundTrip(t *testing.T) {
	m := dirMarker{topicID: 42, uuid: [16]byte{1, 2, 3, 15: 0xff}}
	got, err := parseMarker(m.encode())
	if err != nil || got != m {
		t.Fatalf("parseMarker(encode(%v)) = %v, %v", m, got, err)
	}
	for _, bad := range []string{"", "version: 1\nkafgres_topic_id: 1\ntopic_uuid: " + hex.EncodeToString(m.uuid[:]),
		"version: 0\nkafgres_topic_id: x\ntopic_uuid: " + hex.EncodeToString(m.uuid[:]), "version: 0\nkafgres_topic_id: 1\ntopic_uuid: abc"} {
		if _, err := parseMarker([]byte(bad)); err == nil {
			t.Errorf("parseMarker(%q) accepted", bad)
		}
	}
}

// claim decides what happens to each directory of the data directory.
func TestClaim(t *testing.T) {
	root := t.TempDir()
	want := &metadata.Topic{ID: 7, Name: "t", UUID: [16]byte{7}, Epochs: make([]int32, 2)}
	mine := dirMarker{topicID: 7, uuid: [16]byte{7}}
	other := dirMarker{topicID: 9, uuid: [16]byte{9}}
	mkdir := func(name string, files map[string]string) string {
		d := filepath.Join(root, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, c := range files {
			if err := os.WriteFile(filepath.Join(d, f), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	legacy := mkdir("legacy", map[string]string{"partition.metadata": "version: 0\ntopic_id: " + hex.EncodeToString(want.UUID[:]) + "\n", "00000000000000000000.log": "x"})
	stranger := mkdir("stranger", map[string]string{"partition.metadata": "version: 0\ntopic_id: " + hex.EncodeToString(other.uuid[:]) + "\n"})
	empty := mkdir("empty", nil)
	for _, tc := range []struct {
		name   string
		dir    string
		want   *metadata.Topic
		index  int
		m      dirMarker
		marked bool
		verd   dirVerdict
	}{
		{"ours", root, want, 1, mine, true, dirKeep},
		{"ours beyond the catalog's partitions", root, want, 2, mine, true, dirConflict},
		{"marked for another topic", root, want, 0, other, true, dirCheckDropped},
		{"marked, name unknown", root, nil, 0, other, true, dirCheckDropped},
		{"unmarked, name unknown", stranger, nil, 0, dirMarker{}, false, dirLeave},
		{"0.2.0 directory of the topic", legacy, want, 0, dirMarker{}, false, dirAdopt},
		{"0.2.0 directory beyond the partitions", legacy, want, 5, dirMarker{}, false, dirConflict},
		{"unmarked, another topic's", stranger, want, 0, dirMarker{}, false, dirConflict},
		{"unmarked and empty", empty, want, 0, dirMarker{}, false, dirRemove},
	} {
		if got, _ := claim(tc.dir, tc.want, tc.index, tc.m, tc.marked); got != tc.verd {
			t.Errorf("%s: verdict %d, want %d", tc.name, got, tc.verd)
		}
	}
}

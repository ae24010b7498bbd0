package main

import (
	"os"
	"path/filepath"
	"testing"
)

// The catalogue in docs/conformance.md must always parse: the gate reads it.
func TestCatalogueParses(t *testing.T) {
	repo, err := findRepo()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCatalogue(filepath.Join(repo, "docs", "conformance.md")); err != nil {
		t.Fatal(err)
	}
}

func TestCompareRules(t *testing.T) {
	md := "| id | scenario | client | normalization | reason |\n|--|--|--|--|--|\n" +
		"| drop-x | s* | c | drop-field:x | x differs on purpose |\n" +
		"| tol | other | * | expect-different | known |\n"
	file := filepath.Join(t.TempDir(), "c.md")
	os.WriteFile(file, []byte(md), 0o644)
	cat, err := LoadCatalogue(file)
	if err != nil || len(cat) != 2 {
		t.Fatalf("catalogue: %v %v", cat, err)
	}
	side := func(obs ...map[string]any) *Side { return &Side{Obs: obs} }
	sc := Scenario{Name: "s1"}
	applies := func(s, c string) (es []Entry) {
		for _, e := range cat {
			if e.Applies(s, c) {
				es = append(es, e)
			}
		}
		return es
	}
	ref := side(map[string]any{"x": "1", "y": "a"})
	kaf := side(map[string]any{"x": "2", "y": "a"})
	if got := Compare(sc, ref, kaf, applies("s1", "c")).Status; got != Catalogued {
		t.Errorf("drop-field: got %s", got)
	}
	if got := Compare(sc, ref, kaf, applies("s1", "d")).Status; got != Different {
		t.Errorf("uncatalogued client: got %s", got)
	}
	kaf = side(map[string]any{"x": "2", "y": "b"})
	if got := Compare(sc, ref, kaf, applies("s1", "c")).Status; got != Different {
		t.Errorf("a difference the rule does not cover: got %s", got)
	}
	if got := Compare(Scenario{Name: "other"}, ref, kaf, applies("other", "c")).Status; got != Catalogued {
		t.Errorf("expect-different: got %s", got)
	}
	if got := Compare(sc, &Side{Skip: "no"}, &Side{Skip: "no"}, nil).Status; got != Skipped {
		t.Errorf("skip: got %s", got)
	}
	if got := Compare(sc, ref, nil, nil).Status; got != Failed {
		t.Errorf("missing output: got %s", got)
	}
}

func TestNormalizer(t *testing.T) {
	n := Normalizer{Addr: "127.0.0.1:1234", ClusterID: "AAAAAAAAAAAAAAAAAAAAAQ",
		TopicIDs: map[string]string{"t": "AAAAAAAAAAAAAAAAAAAAAg"}}
	o := n.Apply(map[string]any{"b": "broker 127.0.0.1:1234", "c": "AAAAAAAAAAAAAAAAAAAAAQ",
		"t": "00000000-0000-0000-0000-000000000002", "topic_id": "zzz"})
	want := map[string]string{"b": "broker <broker>", "c": "<cluster-id>", "t": "<topic-id:t>", "topic_id": "<topic-id>"}
	for k, v := range want {
		if o[k] != v {
			t.Errorf("%s: got %v want %v", k, o[k], v)
		}
	}
}

// subset-of-kafgres compares only what kafgres advertises, and still fails
// a range that differs or a key Kafka does not have.
func TestSubsetOfKafgres(t *testing.T) {
	sc := Scenario{Name: "api-versions"}
	rules, err := parseRules("subset-of-kafgres:api_key")
	if err != nil {
		t.Fatal(err)
	}
	entries := []Entry{{ID: "served", Rules: rules}}
	api := func(k, lo, hi int) map[string]any { return map[string]any{"api_key": k, "min": lo, "max": hi} }
	ref := func() *Side { return &Side{Obs: []map[string]any{api(0, 0, 13), api(1, 4, 18), api(8, 2, 10)}} }
	cases := []struct {
		name string
		kaf  *Side
		want Status
	}{
		{"subset with Kafka's ranges", &Side{Obs: []map[string]any{api(0, 0, 13), api(1, 4, 18)}}, Catalogued},
		{"a range that differs", &Side{Obs: []map[string]any{api(0, 0, 12), api(1, 4, 18)}}, Different},
		{"a key Kafka lacks", &Side{Obs: []map[string]any{api(0, 0, 13), api(99, 0, 0)}}, Different},
	}
	for _, c := range cases {
		if got := Compare(sc, ref(), c.kaf, entries).Status; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

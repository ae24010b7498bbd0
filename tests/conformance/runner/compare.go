package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Status of one scenario × client cell.
type Status string

const (
	Identical  Status = "identical"
	Catalogued Status = "catalogued"
	Different  Status = "different"
	Skipped    Status = "skipped"
	Failed     Status = "error" // the client did not finish the scenario
)

// Passed reports whether the cell lets the gate pass. Skipped cells are
// counted apart, never as passed.
func (s Status) Passed() bool { return s == Identical || s == Catalogued }

// Side is what one client printed for one scenario against one broker.
type Side struct {
	Obs     []map[string]any // observations, in printed order
	Skip    string           // reason, when the client skipped the scenario
	Problem string           // set when the client did not finish it
}

// Cell is the verdict for one scenario × client.
type Cell struct {
	Status   Status
	Entries  []string // catalogue ids that made it pass
	Ref, Kaf []string // normalized lines, for the report
	Note     string
}

// parseOutput splits a client's stdout into observations per scenario.
// Lines that do not follow the protocol are problems of that client.
func parseOutput(stdout []byte, want []string) (map[string]*Side, []string) {
	sides := map[string]*Side{}
	known := map[string]bool{}
	for _, s := range want {
		known[s] = true
	}
	var problems []string
	for _, line := range strings.Split(string(stdout), "\n") {
		line = strings.TrimRight(line, "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, js, ok := strings.Cut(line, "\t")
		if !ok || !known[name] {
			problems = append(problems, fmt.Sprintf("line not of the form <requested scenario>\\t<json>: %.200q", line))
			continue
		}
		side := sides[name]
		if side == nil {
			side = &Side{}
			sides[name] = side
		}
		dec := json.NewDecoder(strings.NewReader(js))
		dec.UseNumber() // offsets and timestamps stay exact
		var obs map[string]any
		if err := dec.Decode(&obs); err != nil {
			side.Problem = fmt.Sprintf("bad JSON %.200q: %v", js, err)
			continue
		}
		if reason, ok := obs["skip"]; ok && len(obs) == 1 {
			side.Skip = fmt.Sprint(reason)
			continue
		}
		side.Obs = append(side.Obs, obs)
	}
	return sides, problems
}

// Normalizer replaces what differs between two clusters by construction
// (PROTOCOL.md "Normalization" item 1) and nothing else.
type Normalizer struct {
	Addr      string            // the bootstrap address the client was given
	Also      []string          // the broker's other listeners, also <broker>
	ClusterID string            // learned from Metadata
	TopicIDs  map[string]string // topic -> id, from Metadata
}

func (n Normalizer) replacer() *strings.Replacer {
	var pairs []string
	if n.Addr != "" {
		_, port, _ := strings.Cut(n.Addr, ":")
		pairs = append(pairs, n.Addr, "<broker>", "localhost:"+port, "<broker>")
	}
	for _, a := range n.Also {
		_, port, _ := strings.Cut(a, ":")
		pairs = append(pairs, a, "<broker>", "localhost:"+port, "<broker>")
	}
	if n.ClusterID != "" {
		pairs = append(pairs, n.ClusterID, "<cluster-id>")
	}
	// sorted for a deterministic replacer
	names := make([]string, 0, len(n.TopicIDs))
	for t := range n.TopicIDs {
		names = append(names, t)
	}
	sort.Strings(names)
	for _, t := range names {
		for _, form := range uuidForms(n.TopicIDs[t]) {
			pairs = append(pairs, form, "<topic-id:"+t+">")
		}
	}
	return strings.NewReplacer(pairs...)
}

// Apply normalizes one observation in place and returns it.
func (n Normalizer) Apply(obs map[string]any) map[string]any {
	r := n.replacer()
	_, port, _ := strings.Cut(n.Addr, ":")
	return n.walk(obs, r, port).(map[string]any)
}

func (n Normalizer) walk(v any, r *strings.Replacer, port string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch canonKey(k) {
			case "clusterid":
				if e != nil {
					x[k] = "<cluster-id>"
				}
				continue
			case "topicid":
				if e != nil {
					x[k] = "<topic-id>"
				}
				continue
			case "port":
				if num, ok := e.(json.Number); ok && num.String() == port {
					x[k] = "<port>"
					continue
				}
			}
			x[k] = n.walk(e, r, port)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = n.walk(e, r, port)
		}
		return x
	case string:
		return r.Replace(x)
	}
	return v
}

// canonKey folds cluster_id, clusterId, cluster-id to one spelling.
func canonKey(k string) string {
	k = strings.ToLower(k)
	return strings.NewReplacer("_", "", "-", "").Replace(k)
}

// applyRules runs the catalogue's transforming rules over a side's
// observations; it reports whether it must compare as a set.
func applyRules(obs []map[string]any, rules []Rule) ([]map[string]any, bool) {
	sorted := false
	var out []map[string]any
	for _, o := range obs {
		keep := true
		for _, r := range rules {
			switch r.Kind {
			case "drop-field":
				delete(o, r.Key)
			case "replace-field":
				if _, ok := o[r.Key]; ok {
					o[r.Key] = r.Value
				}
			case "drop-line":
				if v, ok := o[r.Key]; ok && printed(v) == r.Value {
					keep = false
				}
			}
		}
		if keep {
			out = append(out, o)
		}
	}
	for _, r := range rules {
		if r.Kind == "sort-lines" {
			sorted = true
		}
	}
	return out, sorted
}

// printed is a value as a rule names it: strings bare, the rest as JSON.
func printed(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// lines renders observations canonically (sorted keys, exact numbers).
func lines(obs []map[string]any, asSet bool) []string {
	out := make([]string, 0, len(obs))
	for _, o := range obs {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.Encode(o)
		out = append(out, strings.TrimSuffix(buf.String(), "\n"))
	}
	if asSet {
		sort.Strings(out)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// clone deep-copies observations so rules can be applied to a fresh copy.
func clone(obs []map[string]any) []map[string]any {
	b, _ := json.Marshal(obs)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out []map[string]any
	dec.Decode(&out)
	return out
}

// Compare decides one cell. ref and kaf are already normalized per
// cluster; entries are the catalogue rows that apply to this cell.
func Compare(sc Scenario, ref, kaf *Side, entries []Entry) Cell {
	switch {
	case ref == nil || kaf == nil || ref.Problem != "" || kaf.Problem != "":
		c := Cell{Status: Failed}
		c.Note = strings.TrimSpace(problem("reference", ref) + " " + problem("kafgres", kaf))
		return c
	case ref.Skip != "" && kaf.Skip != "":
		return Cell{Status: Skipped, Note: ref.Skip}
	case ref.Skip != "" || kaf.Skip != "":
		return Cell{Status: Different, Note: fmt.Sprintf("skipped on one broker only (reference %q, kafgres %q)", ref.Skip, kaf.Skip),
			Ref: lines(ref.Obs, sc.Unordered), Kaf: lines(kaf.Obs, sc.Unordered)}
	}
	c := Cell{Ref: lines(ref.Obs, sc.Unordered), Kaf: lines(kaf.Obs, sc.Unordered)}
	if equal(c.Ref, c.Kaf) {
		c.Status = Identical
		return c
	}
	var rules []Rule
	tolerate := false
	for _, e := range entries {
		rules = append(rules, e.Rules...)
		c.Entries = append(c.Entries, e.ID)
		for _, r := range e.Rules {
			if r.Kind == "expect-different" {
				tolerate = true
			}
		}
	}
	if len(entries) == 0 {
		c.Status = Different
		return c
	}
	r, set1 := applyRules(clone(ref.Obs), rules)
	k, _ := applyRules(clone(kaf.Obs), rules)
	r = subsetOfKafgres(r, k, rules)
	rl, kl := lines(r, sc.Unordered || set1), lines(k, sc.Unordered || set1)
	if equal(rl, kl) || tolerate {
		c.Status = Catalogued
		return c
	}
	c.Status, c.Entries, c.Ref, c.Kaf = Different, nil, rl, kl
	c.Note = "still different after catalogue rules"
	return c
}

// subsetOfKafgres keeps only the reference observations whose KEY value
// kafgres also printed: "compare what kafgres claims, and claim nothing
// Kafka does not" — e.g. every API kafgres advertises must have Kafka's
// version range, while APIs it does not serve yet are not compared.
func subsetOfKafgres(ref, kaf []map[string]any, rules []Rule) []map[string]any {
	for _, rule := range rules {
		if rule.Kind != "subset-of-kafgres" {
			continue
		}
		seen := map[string]bool{}
		for _, o := range kaf {
			if v, ok := o[rule.Key]; ok {
				seen[printed(v)] = true
			}
		}
		var kept []map[string]any
		for _, o := range ref {
			if v, ok := o[rule.Key]; !ok || seen[printed(v)] {
				kept = append(kept, o)
			}
		}
		ref = kept
	}
	return ref
}

func problem(broker string, s *Side) string {
	if s == nil {
		return broker + ": no output for the scenario."
	}
	if s.Problem != "" {
		return broker + ": " + s.Problem + "."
	}
	return ""
}

// diffText shows both sides line by line: "-" only on the reference, "+"
// only on kafgres, " " on both (as multisets, in the reference's order).
func diffText(ref, kaf []string, max int) string {
	count := map[string]int{}
	for _, l := range kaf {
		count[l]++
	}
	var b strings.Builder
	n := 0
	emit := func(prefix, l string) {
		if n < max {
			b.WriteString("      " + prefix + " " + l + "\n")
		}
		n++
	}
	for _, l := range ref {
		if count[l] > 0 {
			count[l]--
			emit(" ", l)
		} else {
			emit("-", l)
		}
	}
	seen := map[string]int{}
	for _, l := range ref {
		seen[l]++
	}
	for _, l := range kaf {
		if seen[l] > 0 {
			seen[l]--
			continue
		}
		emit("+", l)
	}
	if n > max {
		b.WriteString("      ... " + strconv.Itoa(n-max) + " more lines\n")
	}
	return b.String()
}

package main

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"strings"
)

// The catalogue of intended differences lives in docs/conformance.md as a
// markdown table with the columns id | scenario | client | normalization |
// reason, so the page people read is the list the gate enforces. The rule
// language is documented there; in short, normalization is a ';'-separated
// list of:
//
//	drop-field:KEY          remove KEY from every observation
//	replace-field:KEY=VALUE set KEY (where present) to the string VALUE
//	drop-line:KEY=VALUE     drop observations whose KEY prints as VALUE
//	sort-lines              compare the scenario's lines as a set
//	subset-of-kafgres:KEY   drop reference observations whose KEY kafgres does
//	                        not print at all (the rest must still match)
//	expect-different        a remaining difference is tolerated ("catalogued")
//
// Rules apply to both brokers' output alike.

// Entry is one catalogue row.
type Entry struct {
	ID        string
	Scenarios []string // patterns (path.Match), "*" for all
	Clients   []string
	Rules     []Rule
	Reason    string
}

// Rule is one normalization step.
type Rule struct {
	Kind  string // drop-field, replace-field, drop-line, sort-lines, subset-of-kafgres, expect-different
	Key   string
	Value string
}

// Applies reports whether the entry covers this scenario and client.
func (e Entry) Applies(scenario, client string) bool {
	return matchAny(e.Scenarios, scenario) && matchAny(e.Clients, client)
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

// LoadCatalogue reads the catalogue table from the markdown file.
func LoadCatalogue(file string) ([]Entry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open catalogue: %w", err)
	}
	defer f.Close()
	var entries []Entry
	inTable := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := splitRow(line)
		if !inTable {
			// the catalogue is the table with exactly this header
			if len(cells) == 5 && strings.EqualFold(strings.Join(cells, "|"), "id|scenario|client|normalization|reason") {
				inTable = true
			}
			continue
		}
		if strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			continue // the separator row
		}
		if len(cells) != 5 {
			return nil, fmt.Errorf("%s:%d: catalogue row has %d cells, want 5", file, n, len(cells))
		}
		e := Entry{ID: cells[0], Scenarios: splitList(cells[1]), Clients: splitList(cells[2]), Reason: cells[4]}
		if e.ID == "" || len(e.Scenarios) == 0 || len(e.Clients) == 0 || e.Reason == "" {
			return nil, fmt.Errorf("%s:%d: catalogue row needs an id, scenario, client and reason", file, n)
		}
		if e.Rules, err = parseRules(cells[3]); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", file, n, err)
		}
		entries = append(entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read catalogue: %w", err)
	}
	return entries, nil
}

// splitRow splits "| a | b |" into trimmed cells without the backticks
// markdown needs around code; "\|" stands for a literal bar.
func splitRow(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimPrefix(line, "|")
	line = strings.TrimSuffix(line, "|")
	line = strings.ReplaceAll(line, `\|`, "\x00")
	parts := strings.Split(line, "|")
	for i, p := range parts {
		p = strings.ReplaceAll(p, "\x00", "|")
		parts[i] = strings.Trim(strings.TrimSpace(p), "`")
	}
	return parts
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.Trim(strings.TrimSpace(p), "`"); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseRules(s string) ([]Rule, error) {
	var rules []Rule
	for _, r := range strings.Split(s, ";") {
		r = strings.Trim(strings.TrimSpace(r), "`")
		if r == "" {
			continue
		}
		kind, arg, _ := strings.Cut(r, ":")
		rule := Rule{Kind: kind}
		switch kind {
		case "sort-lines", "expect-different":
			if arg != "" {
				return nil, fmt.Errorf("rule %q takes no argument", r)
			}
		case "drop-field", "subset-of-kafgres":
			if arg == "" {
				return nil, fmt.Errorf("rule %q needs a key", r)
			}
			rule.Key = arg
		case "replace-field", "drop-line":
			k, v, ok := strings.Cut(arg, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("rule %q needs KEY=VALUE", r)
			}
			rule.Key, rule.Value = k, v
		default:
			return nil, fmt.Errorf("unknown normalization rule %q", r)
		}
		rules = append(rules, rule)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("empty normalization (use expect-different to tolerate a difference)")
	}
	return rules, nil
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Scenario is one entry of scenarios.json.
type Scenario struct {
	Name        string `json:"name"`
	Partitions  int    `json:"partitions"`
	Topics      int    `json:"topics"`
	Unordered   bool   `json:"unordered"`
	Description string `json:"description"`
	// Secure scenarios run against the secure pair, one client run each,
	// with Security's client flags and ACLs set up first (secure.go,
	// PROTOCOL.md "Security").
	Secure   bool            `json:"secure"`
	Security *ClientSecurity `json:"security"`
	ACLs     []ACLSpec       `json:"acls"`
}

// LoadScenarios reads scenarios.json.
func LoadScenarios(file string) ([]Scenario, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read scenarios: %w", err)
	}
	var ss []Scenario
	if err := json.Unmarshal(b, &ss); err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	for i := range ss {
		if ss[i].Secure != (ss[i].Security != nil) {
			return nil, fmt.Errorf("%s: scenario %s: a secure scenario needs \"security\" and only it", file, ss[i].Name)
		}
		if ss[i].Topics == 0 {
			ss[i].Topics = 1
		}
		if ss[i].Partitions == 0 {
			ss[i].Partitions = 1
		}
	}
	return ss, nil
}

// Matrix is the client list of docs/conformance.md, in table order. A
// client whose program does not exist yet shows as skipped.
var Matrix = []string{"java", "java-tools", "kcat", "confluent-kafka", "franz", "sarama", "kafka-python"}

// Broker is one side of the comparison as the gate sees it.
type Broker struct {
	Name         string // "reference", "kafgres", "kafgres-table", ...
	Addr         string // what clients are given
	CreateTopics func(context.Context, []TopicSpec) error
	// Label is added to the scenario names of this kafgres's rows in the
	// report, so that a gate run against several kafgres clusters (one per
	// storage engine) tells their cells apart; "" for the first.
	Label string
}

// Gate is one run of the conformance gate.
type Gate struct {
	Repo      string
	Cache     string // build caches shared between runs (CONFORMANCE_CACHE)
	LogDir    string // client stderr
	Clients   []string
	Scenarios []Scenario
	Catalogue []Entry
	Parallel  int
	Out       io.Writer // the report
	Log       io.Writer // progress
	// The secure pair, needed only when a scenario is secure.
	SecureRef, SecureKaf *SecureBroker

	secureMu sync.Mutex // secure runs share the pair's ACLs: one at a time
}

// Result is the outcome: cells by row then client. A row is a scenario
// against one kafgres: the scenario's name, followed by the kafgres's
// Label after the first.
type Result struct {
	Rows                    []string
	Cells                   map[string]map[string]Cell
	Passed, Failed, Skipped int
}

type clientRun struct {
	name   string
	prefix string
	sides  map[string]map[string]*Side // broker -> scenario -> side
}

func (g *Gate) clientDir(name string) string {
	return filepath.Join(g.Repo, "tests", "conformance", "clients", name)
}

func (g *Gate) hasProgram(name string) bool {
	_, err := os.Stat(filepath.Join(g.clientDir(name), "run"))
	return err == nil
}

// Run creates every client's topics on every broker up front, runs each
// client once per broker with all plain scenarios, then once per secure
// scenario and broker of the secure pair, and compares each kafgres with
// the one reference run: several kafgres clusters (one per storage engine)
// share the reference's half of the work. Secure scenarios run against the
// secure pair only and are reported with the first kafgres.
func (g *Gate) Run(ctx context.Context, ref Broker, kafs ...Broker) (*Result, error) {
	if len(kafs) == 0 {
		return nil, errors.New("no kafgres to compare")
	}
	runID := strconv.FormatInt(time.Now().Unix()%1_000_000, 10)
	var plain, secure []Scenario
	for _, s := range g.Scenarios {
		if s.Secure {
			secure = append(secure, s)
		} else {
			plain = append(plain, s)
		}
	}
	if len(secure) > 0 && (g.SecureRef == nil || g.SecureKaf == nil) {
		return nil, errors.New("secure scenarios selected but no secure pair given")
	}
	var runs []*clientRun
	var topics, secureTopics []TopicSpec
	for _, c := range g.Clients {
		if !g.hasProgram(c) {
			continue
		}
		r := &clientRun{name: c, prefix: "c-" + c + "-" + runID, sides: map[string]map[string]*Side{}}
		runs = append(runs, r)
		for _, s := range g.Scenarios {
			for i := 0; i < s.Topics; i++ {
				t := TopicSpec{Name: fmt.Sprintf("%s-%s-%d", r.prefix, s.Name, i), Partitions: s.Partitions}
				if s.Secure {
					secureTopics = append(secureTopics, t)
				} else {
					topics = append(topics, t)
				}
			}
		}
	}
	start := time.Now()
	type prep struct {
		b      Broker
		topics []TopicSpec
		opts   []kgo.Opt
	}
	var preps []prep
	if len(plain) > 0 {
		preps = append(preps, prep{ref, topics, nil})
		for _, kaf := range kafs {
			preps = append(preps, prep{kaf, topics, nil})
		}
	}
	if len(secure) > 0 {
		preps = append(preps, prep{g.SecureRef.Broker, secureTopics, g.SecureRef.Admin}, prep{g.SecureKaf.Broker, secureTopics, g.SecureKaf.Admin})
	}
	for _, p := range preps {
		if err := p.b.CreateTopics(ctx, p.topics); err != nil {
			return nil, fmt.Errorf("create topics on %s: %w", p.b.Name, err)
		}
		if err := WaitTopics(ctx, p.b.Addr, p.topics, p.opts...); err != nil {
			return nil, fmt.Errorf("topics on %s: %w", p.b.Name, err)
		}
	}
	fmt.Fprintf(g.Log, "created %d topics on every broker in %.1fs\n", len(topics)+len(secureTopics), time.Since(start).Seconds())

	// Clients run in parallel with each other; one client runs against the
	// reference, then each kafgres, so its build (first run) is never raced.
	sem := make(chan struct{}, max(g.Parallel, 1))
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, b := range append([]Broker{ref}, kafs...) {
				r.sides[b.Name] = map[string]*Side{}
				if len(plain) > 0 {
					r.sides[b.Name] = g.runClient(ctx, r, b, b.Addr, names(plain), nil, b.Name)
				}
			}
			for _, s := range secure {
				g.runSecure(ctx, r, s)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	norms := map[string]Normalizer{}
	for _, p := range preps {
		info, err := Describe(ctx, p.b.Addr, p.opts...)
		if err != nil {
			return nil, fmt.Errorf("learn %s's cluster and topic ids: %w", p.b.Name, err)
		}
		n := Normalizer{Addr: p.b.Addr, ClusterID: info.ClusterID, TopicIDs: info.TopicIDs}
		key := p.b.Name
		if p.opts != nil {
			key = "secure-" + key
		}
		norms[key] = n
	}
	if len(secure) > 0 {
		for _, sb := range []*SecureBroker{g.SecureRef, g.SecureKaf} {
			n := norms["secure-"+sb.Name]
			n.Also = []string{sb.SSLAddr}
			norms["secure-"+sb.Name] = n
		}
	}

	res := &Result{Cells: map[string]map[string]Cell{}}
	byName := map[string]*clientRun{}
	for _, r := range runs {
		byName[r.name] = r
	}
	for i, kaf := range kafs {
		for _, s := range g.Scenarios {
			if s.Secure && i > 0 {
				continue
			}
			g.compareRow(res, s, s.Name+kaf.Label, ref, kaf, norms, byName)
		}
	}
	return res, nil
}

// compareRow compares, for every client, what scenario s saw on kaf with
// what it saw on ref, as the report's row.
func (g *Gate) compareRow(res *Result, s Scenario, row string, ref, kaf Broker, norms map[string]Normalizer, byName map[string]*clientRun) {
	res.Rows = append(res.Rows, row)
	res.Cells[row] = map[string]Cell{}
	normRef, normKaf := norms[ref.Name], norms[kaf.Name]
	if s.Secure {
		normRef, normKaf = norms["secure-"+ref.Name], norms["secure-"+kaf.Name]
	}
	for _, c := range g.Clients {
		r := byName[c]
		var cell Cell
		if r == nil {
			cell = Cell{Status: Skipped, Note: "no client program yet (tests/conformance/clients/" + c + "/run)"}
		} else {
			rs := normalize(r.sides[ref.Name][s.Name], normRef)
			ks := normalize(r.sides[kaf.Name][s.Name], normKaf)
			var entries []Entry
			for _, e := range g.Catalogue {
				if e.Applies(s.Name, c) {
					entries = append(entries, e)
				}
			}
			cell = Compare(s, rs, ks, entries)
		}
		res.Cells[row][c] = cell
		switch {
		case cell.Status == Skipped:
			res.Skipped++
		case cell.Status.Passed():
			res.Passed++
		default:
			res.Failed++
		}
	}
}

func names(ss []Scenario) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

// runSecure runs one secure scenario of one client against both brokers
// of the secure pair: the scenario's ACLs (and only they) in place, the
// client given its flags and the listener they name. The sides are kept
// under the plain brokers' names, since scenario names are distinct.
func (g *Gate) runSecure(ctx context.Context, r *clientRun, s Scenario) {
	g.secureMu.Lock()
	defer g.secureMu.Unlock()
	for _, b := range []*SecureBroker{g.SecureRef, g.SecureKaf} {
		if r.sides[b.Name] == nil {
			r.sides[b.Name] = map[string]*Side{}
		}
		acls := make([]kmsg.CreateACLsRequestCreation, len(s.ACLs))
		for i, a := range s.ACLs {
			acls[i] = a.resolve(r.prefix, s.Name)
		}
		err := ClearACLs(ctx, b.Admin)
		if err == nil {
			err = SetACLs(ctx, b.Admin, acls)
		}
		if err != nil {
			r.sides[b.Name][s.Name] = &Side{Problem: fmt.Sprintf("ACL setup on the secure %s: %v", b.Name, err)}
			continue
		}
		sides := g.runClient(ctx, r, b.Broker, b.addrFor(s.Security), []string{s.Name}, s.Security.args(b.CAFile), "secure-"+b.Name+"-"+s.Name)
		r.sides[b.Name][s.Name] = sides[s.Name]
		if err := ClearACLs(ctx, b.Admin); err != nil {
			fmt.Fprintf(g.Log, "clearing ACLs on the secure %s after %s: %v\n", b.Name, s.Name, err)
		}
	}
}

// ExitCode is the gate's verdict: 1 on any failed cell.
func (r *Result) ExitCode() int {
	if r.Failed > 0 {
		return 1
	}
	return 0
}

func normalize(s *Side, n Normalizer) *Side {
	if s == nil {
		return nil
	}
	out := *s
	out.Obs = nil
	for _, o := range s.Obs {
		out.Obs = append(out.Obs, n.Apply(o))
	}
	return &out
}

// runClient runs one client program at addr (a listener of broker b) with
// the scenarios and extra flags, and splits its output per scenario. tag
// names its log files.
func (g *Gate) runClient(ctx context.Context, r *clientRun, b Broker, addr string, names, extra []string, tag string) map[string]*Side {
	// 30 s per scenario (PROTOCOL.md) plus a first build
	ctx, cancel := context.WithTimeout(ctx, time.Duration(len(names))*30*time.Second+5*time.Minute)
	defer cancel()
	args := []string{filepath.Join(g.clientDir(r.name), "run"),
		"--bootstrap", addr, "--prefix", r.prefix, "--scenarios", strings.Join(names, ",")}
	cmd := exec.Command("bash", append(args, extra...)...)
	cmd.Dir = g.clientDir(r.name)
	cmd.Env = append(os.Environ(), "CONFORMANCE_CACHE="+g.Cache)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so a timeout ends its children too
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	logName := filepath.Join(g.LogDir, r.name+"-"+tag+".stderr")
	if f, err := os.Create(logName); err == nil {
		defer f.Close()
		cmd.Stderr = f
	}
	start := time.Now()
	err := cmd.Start()
	if err == nil {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err = <-done:
		case <-ctx.Done():
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
			err = fmt.Errorf("timed out after %v", time.Since(start).Round(time.Second))
		}
	}
	fmt.Fprintf(g.Log, "%-16s %-9s %5.1fs %s\n", r.name, tag, time.Since(start).Seconds(), exitText(err))
	os.WriteFile(filepath.Join(g.LogDir, r.name+"-"+tag+".stdout"), stdout.Bytes(), 0o644)

	sides, problems := parseOutput(stdout.Bytes(), names)
	for _, p := range problems {
		fmt.Fprintf(g.Log, "%s against %s: %s\n", r.name, b.Name, p)
	}
	if err != nil {
		// A client that failed did not finish its last scenario with
		// output, nor any after it (PROTOCOL.md).
		last := -1
		for i, n := range names {
			if sides[n] != nil {
				last = i
			}
		}
		for i := max(last, 0); i < len(names); i++ {
			if sides[names[i]] == nil {
				sides[names[i]] = &Side{}
			}
			sides[names[i]].Problem = fmt.Sprintf("client %s (stderr: %s)", exitText(err), logName)
		}
	}
	return sides
}

func exitText(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ee):
		return "exited with " + ee.ProcessState.String()
	}
	return err.Error()
}

// Report prints the scenario × client table, the details of every cell
// that is not identical, and the summary line.
func (g *Gate) Report(res *Result) {
	w := tabwriter.NewWriter(g.Out, 0, 0, 2, ' ', 0)
	fmt.Fprint(w, "scenario")
	for _, c := range g.Clients {
		fmt.Fprint(w, "\t"+c)
	}
	fmt.Fprintln(w)
	for _, row := range res.Rows {
		fmt.Fprint(w, row)
		for _, c := range g.Clients {
			fmt.Fprint(w, "\t"+string(res.Cells[row][c].Status))
		}
		fmt.Fprintln(w)
	}
	w.Flush()

	// cells that failed or were skipped for the same reason are listed
	// once, with their scenarios
	type group struct {
		head      string
		scenarios []string
	}
	var details []string
	var skips []*group
	grouped := map[string]*group{}
	add := func(list *[]*group, head, scenario string) {
		if g := grouped[head]; g != nil {
			g.scenarios = append(g.scenarios, scenario)
			return
		}
		g := &group{head: head, scenarios: []string{scenario}}
		grouped[head] = g
		*list = append(*list, g)
	}
	var failures []*group
	for _, row := range res.Rows {
		for _, c := range g.Clients {
			cell := res.Cells[row][c]
			head := fmt.Sprintf("  %s × %s: %s", row, c, cell.Status)
			switch cell.Status {
			case Different:
				d := head
				if cell.Note != "" {
					d += " (" + cell.Note + ")"
				}
				d += "\n      (- reference only, + kafgres only)\n" + diffText(cell.Ref, cell.Kaf, 40)
				details = append(details, d)
			case Catalogued:
				details = append(details, head+" by "+strings.Join(cell.Entries, ", ")+"\n")
			case Failed:
				add(&failures, "  "+c+": error: "+cell.Note, row)
			case Skipped:
				add(&skips, "  "+c+": "+cell.Note, row)
			}
		}
	}
	show := func(title string, list []*group) {
		if len(list) == 0 {
			return
		}
		fmt.Fprintln(g.Out, "\n"+title)
		for _, gr := range list {
			fmt.Fprintf(g.Out, "%s\n      (%s)\n", gr.head, strings.Join(gr.scenarios, ", "))
		}
	}
	// skips first: CI keeps only the tail of the output, and that should
	// be what failed
	show("skipped:", skips)
	if len(details) > 0 {
		fmt.Fprintln(g.Out, "\nnot identical:")
		for _, d := range details {
			fmt.Fprint(g.Out, d)
		}
	}
	show("client errors:", failures)
	fmt.Fprintf(g.Out, "\n%d passed, %d failed, %d skipped\n", res.Passed, res.Failed, res.Skipped)
	if res.Failed > 0 {
		var names []string
		for _, row := range res.Rows {
			for _, c := range g.Clients {
				if st := res.Cells[row][c].Status; st != Skipped && !st.Passed() {
					names = append(names, row+" × "+c)
				}
			}
		}
		fmt.Fprintf(g.Out, "failed: %s\n", strings.Join(names, ", "))
	}
}

// Package protocol is what the Go conformance clients (franz, sarama) share
// of tests/conformance/PROTOCOL.md: the command line, the per-scenario topic
// and group names, and the observation lines.
package protocol

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ScenarioBudget stays below the 30 s PROTOCOL.md allows per scenario so
// that a hung scenario still prints its observation before the runner
// gives up on the client.
const ScenarioBudget = 25 * time.Second

// Names are the broker address and the names the runner gives one
// scenario's topics and group.
type Names struct {
	Bootstrap string
	Prefix    string
	Scenario  string
	Security  Security // PLAINTEXT (the zero value) unless the runner says otherwise
}

// Security is how to connect: the optional flags of PROTOCOL.md
// "Security". The zero value is PLAINTEXT.
type Security struct {
	Protocol  string // "", PLAINTEXT, SASL_PLAINTEXT or SASL_SSL
	Mechanism string // SCRAM-SHA-256 or PLAIN
	Username  string
	Password  string
	CAFile    string // PEM CA the broker's certificate chains to (SASL_SSL)
}

// Topic is the i-th topic the runner created for the scenario.
func (n Names) Topic(i int) string { return fmt.Sprintf("%s-%s-%d", n.Prefix, n.Scenario, i) }

// MissingTopic is the topic nobody creates for the scenario.
func (n Names) MissingTopic() string { return fmt.Sprintf("%s-%s-missing", n.Prefix, n.Scenario) }

// Group is the scenario's consumer group.
func (n Names) Group() string { return fmt.Sprintf("%s-%s-g", n.Prefix, n.Scenario) }

// Output writes observation lines to stdout.
type Output struct {
	mu sync.Mutex
	w  *bufio.Writer
}

// Emit prints one observation line of scenario. encoding/json sorts map
// keys, which gives the deterministic key order the protocol requires.
func (o *Output) Emit(scenario string, obs map[string]any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep values byte-identical to what was read
	if err := enc.Encode(obs); err != nil {
		panic(fmt.Sprintf("encoding observation: %v", err)) // only plain values are emitted
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	fmt.Fprintf(o.w, "%s\t%s", scenario, buf.Bytes()) // Encode adds the newline
}

// Flush writes out what was emitted, so a later crash cannot swallow a
// finished scenario's output.
func (o *Output) Flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.w.Flush()
}

// Main parses the command line of PROTOCOL.md and calls run for each
// requested scenario, in order, flushing the output after each.
func Main(client string, run func(n Names, out *Output)) {
	bootstrap := flag.String("bootstrap", "", "broker HOST:PORT")
	prefix := flag.String("prefix", "", "topic name prefix, unique per run")
	list := flag.String("scenarios", "", "comma-separated scenario names")
	var sec Security
	flag.StringVar(&sec.Protocol, "security-protocol", "", "PLAINTEXT (default), SASL_PLAINTEXT or SASL_SSL")
	flag.StringVar(&sec.Mechanism, "sasl-mechanism", "", "SCRAM-SHA-256 or PLAIN")
	flag.StringVar(&sec.Username, "username", "", "SASL user")
	flag.StringVar(&sec.Password, "password", "", "SASL password")
	flag.StringVar(&sec.CAFile, "ca-file", "", "PEM CA certificate the broker's chains to (SASL_SSL)")
	flag.Parse()
	if *bootstrap == "" || *prefix == "" || *list == "" {
		fmt.Fprintf(os.Stderr, "usage: %s --bootstrap HOST:PORT --prefix PREFIX --scenarios a,b,c\n", client)
		os.Exit(2)
	}
	out := &Output{w: bufio.NewWriter(os.Stdout)}
	defer out.Flush()
	for _, name := range strings.Split(*list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			run(Names{Bootstrap: *bootstrap, Prefix: *prefix, Scenario: name, Security: sec}, out)
			out.Flush()
		}
	}
}

// Printable renders bytes per PROTOCOL.md: UTF-8 text as a string, other
// bytes as "hex:...", and a null as JSON null.
func Printable(b []byte) any {
	if b == nil {
		return nil
	}
	if utf8.Valid(b) {
		return string(b)
	}
	return "hex:" + hex.EncodeToString(b)
}

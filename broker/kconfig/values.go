package kconfig

// Config values as Kafka's ConfigDef parses, validates and prints them.
//
// Topic and broker configs arrive as strings (CreateTopics, AlterConfigs,
// IncrementalAlterConfigs) and are stored as strings (kafgres.topic_config,
// kafgres.broker_config). Kafka parses each by its type, checks it with the
// key's validator, and describes it in canonical form (" TRUE" is "true",
// "+5" is "5", "1" for a DOUBLE is "1.0", a list loses the blanks around its
// commas). Clients see the error messages verbatim, so they follow Kafka's
// wording; testdata/config-validation-4.4.0.tsv holds what Kafka 4.4
// answers to a sweep of values and the tests replay it here.

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kafgres/kafgres/broker/apierr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// StorableText reports whether s can be a Postgres text value: UTF-8
// without NUL. Names and values kafgres keeps as text (configs, quota
// entities) are refused otherwise, rather than failing in Postgres.
func StorableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// UnstorableText is the message for a name or value StorableText refuses;
// subject says what s is ("Configuration name").
func UnstorableText(subject, s string) string {
	return fmt.Sprintf("%s %q cannot be stored: kafgres keeps it as PostgreSQL text, which cannot hold a NUL byte or invalid UTF-8", subject, s)
}

// configValue is a parsed value. str is the canonical string Kafka
// describes; the other fields hold the value by type.
type configValue struct {
	str  string
	num  int64 // INT, SHORT, LONG
	f    float64
	b    bool
	list []string
}

// parseConfig parses raw as a value of type typ for key name, with
// ConfigDef.parseType's rules: surrounding whitespace is ignored, booleans
// are case-insensitive, numbers are Java's, lists split on commas with
// optional blanks around them. Errors quote the raw value.
func parseConfig(name string, typ kmsg.ConfigType, raw string) (configValue, *apierr.Error) {
	trimmed := javaTrim(raw)
	switch typ {
	case kmsg.ConfigTypeBoolean:
		switch strings.ToLower(trimmed) {
		case "true":
			return configValue{str: "true", b: true}, nil
		case "false":
			return configValue{str: "false"}, nil
		}
		return configValue{}, invalidValue(name, raw, "Expected value to be either true or false")
	case kmsg.ConfigTypeInt, kmsg.ConfigTypeShort, kmsg.ConfigTypeLong:
		bits := map[kmsg.ConfigType]int{kmsg.ConfigTypeInt: 32, kmsg.ConfigTypeShort: 16, kmsg.ConfigTypeLong: 64}[typ]
		n, err := strconv.ParseInt(trimmed, 10, bits)
		if err != nil {
			return configValue{}, invalidValue(name, raw, "Not a number of type "+typ.String())
		}
		return configValue{str: strconv.FormatInt(n, 10), num: n}, nil
	case kmsg.ConfigTypeDouble:
		f, ok := javaParseDouble(trimmed)
		if !ok {
			return configValue{}, invalidValue(name, raw, "Not a number of type DOUBLE")
		}
		return configValue{str: javaDoubleString(f), f: f}, nil
	case kmsg.ConfigTypeList:
		if trimmed == "" {
			return configValue{str: "", list: []string{}}, nil
		}
		l := listSeparator.Split(trimmed, -1)
		return configValue{str: strings.Join(l, ","), list: l}, nil
	default: // STRING, CLASS, PASSWORD
		return configValue{str: trimmed}, nil
	}
}

var listSeparator = regexp.MustCompile(`\s*,\s*`)

// invalidValue is ConfigException(name, value, message)'s text.
func invalidValue(name string, value any, reason string) *apierr.Error {
	return apierr.InvalidConfig("Invalid value %v for configuration %s: %s", value, name, reason)
}

// javaTrim is String.trim: it strips every character up to U+0020.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

// javaParseDouble accepts what Double.parseDouble does for the values one
// types: decimal and scientific notation, an optional sign, "NaN",
// "Infinity", a trailing f/F/d/D. Go's own spellings (inf, nan in any case,
// digit separators) are refused.
func javaParseDouble(s string) (float64, bool) {
	body := s
	if strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") {
		body = s[1:]
	}
	switch body {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if s[0] == '-' {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if strings.ContainsAny(s, "_iInN") || s == "" {
		return 0, false
	}
	if last := s[len(s)-1]; last == 'f' || last == 'F' || last == 'd' || last == 'D' {
		s = s[:len(s)-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false // out of range is ±Inf or 0 in Java too
	}
	return f, true
}

// javaDoubleString is Double.toString: the shortest digits that round-trip,
// in plain notation from 10^-3 up to 10^7 (always with a fraction digit),
// in computerized scientific notation ("1.0E-5") outside it.
func javaDoubleString(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // 1e-05, 1.5e+07
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(e)
}

// A validator checks a parsed value, as a ConfigDef.Validator does.
type validator func(name string, v configValue) *apierr.Error

// atLeast is ConfigDef.Range.atLeast.
func atLeast(min int64) validator {
	return func(name string, v configValue) *apierr.Error {
		if v.num < min {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be at least %d", min))
		}
		return nil
	}
}

// between is ConfigDef.Range.between for integers.
func between(min, max int64) validator {
	return func(name string, v configValue) *apierr.Error {
		if v.num < min {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be at least %d", min))
		}
		if v.num > max {
			return invalidValue(name, v.str, fmt.Sprintf("Value must be no more than %d", max))
		}
		return nil
	}
}

// ratio is ConfigDef.Range.between(0, 1) on a DOUBLE; NaN passes, as it
// does in Java's comparisons.
func ratio(name string, v configValue) *apierr.Error {
	if v.f < 0 {
		return invalidValue(name, v.str, "Value must be at least 0")
	}
	if v.f > 1 {
		return invalidValue(name, v.str, "Value must be no more than 1")
	}
	return nil
}

// gzipLevel is CompressionType.GZIP.levelValidator().
func gzipLevel(name string, v configValue) *apierr.Error {
	if v.num != -1 && (v.num < 1 || v.num > 9) {
		return invalidValue(name, v.str, "Value must be between 1 and 9 or equal to -1")
	}
	return nil
}

// oneOf is ConfigDef.ValidString.in.
func oneOf(allowed ...string) validator {
	return func(name string, v configValue) *apierr.Error {
		for _, a := range allowed {
			if v.str == a {
				return nil
			}
		}
		return invalidValue(name, v.str, "String must be one of: "+strings.Join(allowed, ", "))
	}
}

// compressionTypes is BrokerCompressionType.names() in Kafka's order.
var compressionTypes = []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}

// cleanupPolicies checks a cleanup policy list (ConfigDef.ValidList.in):
// no empty element, each compact or delete. The broker's log.cleanup.policy
// also refuses duplicates; the topic's cleanup.policy does not.
func cleanupPolicies(noDuplicates bool) validator {
	return func(name string, v configValue) *apierr.Error {
		if noDuplicates {
			seen := map[string]bool{}
			for _, p := range v.list {
				if seen[p] {
					return apierr.InvalidConfig("Configuration '%s' values must not be duplicated.", name)
				}
				seen[p] = true
			}
		}
		for _, p := range v.list {
			if p == "" {
				return apierr.InvalidConfig("Configuration '%s' values must not be empty.", name)
			}
			if p != "compact" && p != "delete" {
				return invalidValue(name, p, "String must be one of: compact, delete")
			}
		}
		return nil
	}
}

var throttledReplica = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

// throttledReplicas is ThrottledReplicaListValidator: "*", or a list of
// partition:broker pairs.
func throttledReplicas(name string, v configValue) *apierr.Error {
	if strings.Join(v.list, "") == "*" {
		return nil
	}
	for _, r := range v.list {
		if !throttledReplica.MatchString(r) {
			return invalidValue(name, "["+strings.Join(v.list, ", ")+"]",
				name+" must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...")
		}
	}
	return nil
}

// javaHashSetOrder is the order a java.util.HashSet of these strings,
// added in this order, iterates in; Kafka prints sets of config names
// that way in some error messages.
func javaHashSetOrder(names []string) []string {
	buckets := 16
	for float64(len(names)) > 0.75*float64(buckets) {
		buckets *= 2
	}
	idx := func(s string) int {
		var h uint32
		for _, c := range []rune(s) { // UTF-16 code units for the BMP
			h = 31*h + uint32(c)
		}
		return int((h ^ h>>16) & uint32(buckets-1))
	}
	out := append([]string(nil), names...)
	// stable sort by bucket keeps insertion order within a bucket
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && idx(out[j]) < idx(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

package principal

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// DefaultRules is Kafka's default ssl.principal.mapping.rules.
const DefaultRules = "DEFAULT"

// The rule grammar of Kafka's SslPrincipalMapper, written out as a regular
// expression. Go's regexp picks the submatches a backtracking engine would
// (leftmost-first, lazy quantifiers honoured), so the same splitting
// results. '.' is spelled out because Java's excludes every line
// terminator, Go's only '\n'; \s likewise (Java's includes \x0B).
const (
	javaDot   = `[^\n\r\x{85}\x{2028}\x{2029}]`
	javaSpace = `[ \t\n\x0B\f\r]`
	ruleBody  = `(?:\\` + javaDot + `|[^\\/])*` // backslash escapes anything, else no '/'
	// groups: 1 DEFAULT, 2 pattern, 3 replacement, 4 case flag, 5 anything else
	ruleGrammar = `(DEFAULT)|RULE:(` + ruleBody + `)/(` + ruleBody + `)/([LU]?)` + javaDot + `*?|(` + javaDot + `*?)`
)

var (
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + ruleGrammar + `)` + javaSpace + `*(?:,` + javaSpace + `*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + ruleGrammar + `)`)
	backRef      = regexp.MustCompile(`\$([0-9]+)`)
)

// Mapper applies ssl.principal.mapping.rules to distinguished names.
type Mapper struct{ rules []rule }

type rule struct {
	isDefault   bool
	pattern     string
	whole       *regexp.Regexp // the pattern, anchored: Java's Matcher.matches
	re          *regexp.Regexp // the pattern, for replaceAll
	replacement string
	lower       bool
	upper       bool
}

// ParseRules parses a rules string as Kafka's SslPrincipalMapper does:
// comma-separated DEFAULT or RULE:pattern/replacement/[LU] (a backslash
// escapes '/' or ',' inside pattern and replacement), surrounding spaces
// and empty rules ignored.
//
// Patterns are Go regular expressions (RE2) rather than Java's: the common
// syntax is the same; Java-only constructs (lookaround, backreferences,
// possessive quantifiers) are refused here.
func ParseRules(rules string) (*Mapper, error) {
	trimmed := strings.TrimFunc(rules, func(r rune) bool { return r <= ' ' }) // Java's String.trim
	m := &Mapper{}
	for _, sub := range ruleSplitter.FindAllStringSubmatch(trimmed, -1) {
		text := sub[1]
		loc := ruleParser.FindStringSubmatchIndex(text)
		if loc == nil {
			return nil, fmt.Errorf("Invalid rule: %s", text)
		}
		if loc[1] != len(text) {
			return nil, fmt.Errorf("Invalid rule: `%s`, unmatched substring: `%s`", text, text[loc[1]:])
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return text[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, rule{isDefault: true})
			continue
		}
		pattern, ok := group(2)
		if !ok {
			continue // an empty rule
		}
		replacement, _ := group(3)
		flag, _ := group(4)
		r := rule{pattern: pattern, replacement: replacement, lower: flag == "L", upper: flag == "U"}
		var err error
		if r.re, err = regexp.Compile(pattern); err != nil {
			return nil, fmt.Errorf("rule %s: %w", text, err)
		}
		r.whole = regexp.MustCompile(`\A(?:` + pattern + `)\z`)
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// Name maps a distinguished name with the first rule that applies, as
// SslPrincipalMapper.getName does; no rule applying is an error (Kafka
// fails the connection).
func (m *Mapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		name, ok, err := r.apply(dn)
		if err != nil {
			return "", err
		}
		if ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("No rules apply to %s, rules %s", dn, m)
}

// String is Kafka's rendering of the rule list, e.g. [RULE:^CN=(.*)$/$1/L, DEFAULT].
func (m *Mapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (r rule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.replacement
	if r.lower {
		s += "/L"
	} else if r.upper {
		s += "/U"
	}
	return s
}

func (r rule) apply(dn string) (string, bool, error) {
	if r.isDefault {
		return dn, true, nil
	}
	if !r.whole.MatchString(dn) {
		return "", false, nil
	}
	groups := r.re.NumSubexp()
	repl, err := escapeLiteralBackReferences(r.replacement, groups)
	if err != nil {
		return "", false, err
	}
	// String.replaceAll: every match of the pattern in the name, not just
	// the whole-name one.
	var b strings.Builder
	last := 0
	for _, loc := range r.re.FindAllStringSubmatchIndex(dn, -1) {
		b.WriteString(dn[last:loc[0]])
		if err := r.appendReplacement(&b, repl, dn, loc); err != nil {
			return "", false, err
		}
		last = loc[1]
	}
	b.WriteString(dn[last:])
	out := b.String()
	switch {
	case r.lower:
		out = cases.Lower(language.English).String(out)
	case r.upper:
		out = cases.Upper(language.English).String(out)
	}
	return out, true, nil
}

// escapeLiteralBackReferences turns a $n that names no group into a literal
// "$n", as Kafka does before replacing: a number too large loses trailing
// digits until it names a group or is a single digit (then it is escaped).
// Kafka inserts each backslash at the position the reference had in the
// original replacement, so after the first insertion later ones land one
// character early; that is kept.
func escapeLiteralBackReferences(unescaped string, groups int) (string, error) {
	if groups == 0 {
		return unescaped, nil
	}
	value := unescaped
	for _, loc := range backRef.FindAllStringSubmatchIndex(unescaped, -1) {
		digits := unescaped[loc[2]:loc[3]]
		if strings.HasPrefix(digits, "0") {
			continue
		}
		n, err := strconv.ParseInt(digits, 10, 32)
		if err != nil {
			return "", fmt.Errorf("replacement %q: group reference %s: %w", unescaped, digits, err)
		}
		for n > int64(groups) && n >= 10 {
			n /= 10
		}
		if n > int64(groups) {
			at := loc[2] - 1
			value = value[:at] + `\` + value[at:]
		}
	}
	return value, nil
}

// appendReplacement expands a replacement as java.util.regex.Matcher does:
// \x is x, $n the longest run of digits that names a group, ${name} a named
// group, an unmatched group nothing.
func (r rule) appendReplacement(b *strings.Builder, repl, text string, loc []int) error {
	groups := r.re.NumSubexp()
	for i := 0; i < len(repl); {
		c := repl[i]
		switch c {
		case '\\':
			i++
			if i == len(repl) {
				return fmt.Errorf("replacement %q: character to be escaped is missing", repl)
			}
			_, size := utf8.DecodeRuneInString(repl[i:])
			b.WriteString(repl[i : i+size])
			i += size
			continue
		case '$':
			i++
			if i == len(repl) {
				return fmt.Errorf("replacement %q: Illegal group reference: group index is missing", repl)
			}
			var ref int
			if repl[i] == '{' {
				i++
				j := i
				for j < len(repl) && isASCIIAlnum(repl[j]) {
					j++
				}
				name := repl[i:j]
				switch {
				case name == "":
					return fmt.Errorf("replacement %q: named capturing group has 0 length name", repl)
				case j == len(repl) || repl[j] != '}':
					return fmt.Errorf("replacement %q: named capturing group is missing trailing '}'", repl)
				case name[0] >= '0' && name[0] <= '9':
					return fmt.Errorf("replacement %q: capturing group name {%s} starts with digit character", repl, name)
				}
				ref = r.re.SubexpIndex(name)
				if ref < 0 {
					return fmt.Errorf("replacement %q: No group with name {%s}", repl, name)
				}
				i = j + 1
			} else {
				if repl[i] < '0' || repl[i] > '9' {
					return fmt.Errorf("replacement %q: Illegal group reference", repl)
				}
				ref = int(repl[i] - '0')
				i++
				for i < len(repl) && repl[i] >= '0' && repl[i] <= '9' {
					next := ref*10 + int(repl[i]-'0')
					if next > groups {
						break
					}
					ref = next
					i++
				}
				if ref > groups {
					return fmt.Errorf("replacement %q: No group %d", repl, ref)
				}
			}
			if loc[2*ref] >= 0 {
				b.WriteString(text[loc[2*ref]:loc[2*ref+1]])
			}
			continue
		}
		b.WriteByte(c)
		i++
	}
	return nil
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

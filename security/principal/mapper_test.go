package principal

import (
	"strings"
	"testing"
)

// Cases from Kafka's SslPrincipalMapperTest.

func TestValidAndInvalidRules(t *testing.T) {
	for _, r := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParseRules(r); err != nil {
			t.Errorf("%q: %v", r, err)
		}
	}
	for _, r := range []string{
		"default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		"RULE:^CN=(?=x)$/$1/", // Java-only syntax: refused (a difference from Kafka)
	} {
		if _, err := ParseRules(r); err == nil {
			t.Errorf("%q accepted", r)
		}
	}
}

func TestMapperNames(t *testing.T) {
	m, err := ParseRules(strings.Join([]string{
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
		"DEFAULT",
	}, ", "))
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := m.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	m, _ = ParseRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if got, _ := m.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); got != `Tkac\, Adam` {
		t.Errorf("comma with whitespace: %q", got)
	}
	m, _ = ParseRules("RULE:^CN=(.*)$/$1/")
	if _, err := m.Name("OU=x"); err == nil || !strings.HasPrefix(err.Error(), "No rules apply to OU=x") {
		t.Errorf("no rule: %v", err)
	}
}

func TestRulesSplitting(t *testing.T) {
	for _, c := range []struct{ want, rules string }{
		{"[]", ""},
		{"[DEFAULT]", "DEFAULT"},
		{"[RULE:/]", "RULE://"},
		{"[RULE:/.*]", "RULE:/.*/"},
		{"[RULE:/.*/L]", "RULE:/.*/L"},
		{"[RULE:/, DEFAULT]", "RULE://,DEFAULT"},
		{"[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "},
		{"[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "},
		{"[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "},
		{"[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "},
		{"[]", ",   , , ,      , , ,   "},
		{"[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"},
		{"[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "},
		{"[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"},
		{`[RULE:\/\\\(\)\n\t/\/\/]`, `RULE:\/\\\(\)\n\t/\/\//`},
		{`[RULE:\**\/+/*/L, RULE:\/*\**/**]`, `RULE:\**\/+/*/L,RULE:\/*\**/**/`},
		{`[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
			`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`},
	} {
		m, err := ParseRules(c.rules)
		if err != nil {
			t.Errorf("%q: %v", c.rules, err)
			continue
		}
		if got := m.String(); got != c.want {
			t.Errorf("%q: %s, want %s", c.rules, got, c.want)
		}
	}
}

func TestReplacement(t *testing.T) {
	for _, c := range []struct{ rules, dn, want string }{
		{"RULE:^CN=([a-z]+),O=([a-z]+)$/$2.$1/", "CN=duke,O=sun", "sun.duke"},
		{"RULE:^CN=([a-z]+)$/$1@$4/", "CN=duke", "duke@$4"},     // no group 4: literal
		{"RULE:^CN=([a-z]+)$/$12/", "CN=duke", "duke2"},         // $12 is $1 then 2
		{"RULE:^CN=([a-z]+)$/x\\$1/", "CN=duke", "x$1"},         // escaped dollar
		{"RULE:^CN=(?P<n>[a-z]+)$/${n}!/U", "CN=duke", "DUKE!"}, // named group
		{"RULE:^CN=([a-z]+)(X)?$/$1$2/", "CN=duke", "duke"},     // unmatched group: nothing
		{"RULE:^CN=(.*)$/$1/L", "CN=İSTANBUL", "i̇stanbul"},     // Java's full case mapping
		{"RULE:^CN=(.*)$/$1/U", "CN=straße", "STRASSE"},
		{"RULE:[ab]+?/_/", "abba", "____"}, // replaceAll replaces every match
	} {
		m, err := ParseRules(c.rules)
		if err != nil {
			t.Fatalf("%q: %v", c.rules, err)
		}
		if got, err := m.Name(c.dn); err != nil || got != c.want {
			t.Errorf("%s on %q = %q, %v; want %q", c.rules, c.dn, got, err, c.want)
		}
	}
	m, _ := ParseRules("RULE:^CN=(.*)$/$x/")
	if _, err := m.Name("CN=a"); err == nil {
		t.Error("illegal group reference accepted")
	}
}

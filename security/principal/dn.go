// Package principal turns a TLS client's certificate into the Kafka
// principal name Kafka would give it: the subject as Java's
// X500Principal.getName() prints it (RFC 2253), then Kafka's
// ssl.principal.mapping.rules (SslPrincipalMapper). No I/O.
package principal

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"
)

// rfc2253Keywords are the attribute types X500Principal's RFC 2253 form
// prints by name; every other type is printed as its dotted OID with the
// value as '#' and the hex of its DER encoding.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

type attribute struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// attributeSET is one relative distinguished name (encoding/asn1 reads a
// slice whose type name ends in SET as a SET OF).
type attributeSET []attribute

// SubjectName is cert's subject as Java's X500Principal.getName() returns
// it, the string Kafka's DefaultKafkaPrincipalBuilder feeds the mapping
// rules.
func SubjectName(cert *x509.Certificate) (string, error) {
	return DistinguishedName(cert.RawSubject)
}

// DistinguishedName formats a DER Name (RDNSequence) in RFC 2253 form as
// Java does: RDNs last to first, separated by ',', the attributes of a
// multi-valued RDN joined by '+' in encoded order.
func DistinguishedName(der []byte) (string, error) {
	var rdns []attributeSET
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", fmt.Errorf("distinguished name: %w", err)
	}
	if len(rest) != 0 {
		return "", fmt.Errorf("distinguished name: %d trailing bytes", len(rest))
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		if i != len(rdns)-1 {
			b.WriteByte(',')
		}
		for j, a := range rdns[i] {
			if j > 0 {
				b.WriteByte('+')
			}
			writeAttribute(&b, a)
		}
	}
	return b.String(), nil
}

func writeAttribute(b *strings.Builder, a attribute) {
	kw, named := rfc2253Keywords[a.Type.String()]
	s, isString := decodeString(a.Value)
	if !named || !isString {
		if !named {
			kw = a.Type.String()
		}
		b.WriteString(kw)
		b.WriteString("=#")
		b.WriteString(hex.EncodeToString(a.Value.FullBytes))
		return
	}
	b.WriteString(kw)
	b.WriteByte('=')
	b.WriteString(escapeValue(s))
}

// decodeString reads the directory string types Java's AVA prints as text
// (isDerString: PrintableString, T61String, IA5String, GeneralString,
// UTF8String, BMPString). Java decodes the content bytes of every one of
// them as UTF-8 (a BMPString "hé" prints as "\00h\00\ufffd"); so do we,
// each invalid byte becoming U+FFFD.
func decodeString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String, asn1.TagGeneralString,
		asn1.TagUTF8String, asn1.TagBMPString:
	default:
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(v.Bytes); {
		r, size := utf8.DecodeRune(v.Bytes[i:])
		b.WriteRune(r) // utf8.RuneError for an invalid byte
		i += size
	}
	return b.String(), true
}

// escapeValue escapes as Java's AVA.toRFC2253String: a backslash before
// each of , = + < > # ; " \ anywhere, NUL as \00, and before every leading
// and trailing space or carriage return. Other characters, control or
// non-ASCII, are printed as they are.
func escapeValue(s string) string {
	var esc []rune
	for _, c := range s {
		switch {
		case strings.ContainsRune(",=+<>#;\"\\", c):
			esc = append(esc, '\\', c)
		case c == 0:
			esc = append(esc, '\\', '0', '0')
		default:
			esc = append(esc, c)
		}
	}
	lead := 0
	for lead < len(esc) && (esc[lead] == ' ' || esc[lead] == '\r') {
		lead++
	}
	trail := len(esc) - 1
	for trail >= 0 && (esc[trail] == ' ' || esc[trail] == '\r') {
		trail--
	}
	var b strings.Builder
	for i, c := range esc {
		if i < lead || i > trail {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

package principal

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"math/big"
	"testing"
	"time"
)

var (
	oidCN     = asn1.ObjectIdentifier{2, 5, 4, 3}
	oidOU     = asn1.ObjectIdentifier{2, 5, 4, 11}
	oidDC     = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 25}
	oidUID    = asn1.ObjectIdentifier{0, 9, 2342, 19200300, 100, 1, 1}
	oidStreet = asn1.ObjectIdentifier{2, 5, 4, 9}
	oidEmail  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	oidSerial = asn1.ObjectIdentifier{2, 5, 4, 5}
)

func str(tag int, b []byte) asn1.RawValue {
	return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: b}
}

func utf8s(s string) asn1.RawValue { return str(asn1.TagUTF8String, []byte(s)) }

func rdn(attrs ...attribute) attributeSET { return attrs }

// dnCases: subjects and what Java 17's X500Principal.getName() printed for
// the same DER (javax.security.auth.x500.X500Principal(byte[]), run once
// by hand; the DER is rebuilt here).
var dnCases = []struct {
	name string
	rdns []attributeSET
	want string
}{
	{"plain", []attributeSET{
		rdn(attribute{asn1.ObjectIdentifier{2, 5, 4, 6}, str(asn1.TagPrintableString, []byte("US"))}),
		rdn(attribute{asn1.ObjectIdentifier{2, 5, 4, 10}, utf8s("Sun Microsystems")}),
		rdn(attribute{oidOU, utf8s("JavaSoft")}),
		rdn(attribute{oidCN, utf8s("Duke")}),
	}, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,C=US"},
	{"specials", []attributeSET{rdn(attribute{oidCN, utf8s(`a,b+c"d\e<f>g;h=i#j`)})}, `CN=a\,b\+c\"d\\e\<f\>g\;h\=i\#j`},
	{"edges", []attributeSET{
		rdn(attribute{oidCN, utf8s("#hash")}),
		rdn(attribute{oidOU, utf8s("  lead and trail  ")}),
	}, `OU=\ \ lead and trail\ \ ,CN=\#hash`},
	{"unicode", []attributeSET{rdn(attribute{oidCN, utf8s("Dœ 日本 \U0001F600")})}, "CN=Dœ 日本 \U0001F600"},
	{"control", []attributeSET{rdn(attribute{oidCN, utf8s("a\x01b\x00c\rd@e_f&g\r")})}, "CN=a\x01b\\00c\rd@e_f&g\\\r"},
	{"oids", []attributeSET{
		rdn(attribute{oidDC, str(asn1.TagIA5String, []byte("com"))}),
		rdn(attribute{oidUID, utf8s("u1")}),
		rdn(attribute{oidStreet, utf8s("Main St")}),
		rdn(attribute{oidEmail, str(asn1.TagIA5String, []byte("a@b.c"))}),
		rdn(attribute{oidSerial, str(asn1.TagPrintableString, []byte("42"))}),
	}, "2.5.4.5=#13023432,1.2.840.113549.1.9.1=#16056140622e63,STREET=Main St,UID=u1,DC=com"},
	{"multi", []attributeSET{rdn(attribute{oidCN, utf8s("a")}, attribute{oidOU, utf8s("b")})}, "CN=a+OU=b"},
	{"bmp-t61", []attributeSET{
		rdn(attribute{oidCN, str(asn1.TagBMPString, []byte{0, 'h', 0x00, 0xe9})}),
		rdn(attribute{oidOU, str(asn1.TagT61String, []byte{'h', 0xe9})}),
	}, "OU=h\ufffd,CN=\\00h\\00\ufffd"},
	{"not-a-string", []attributeSET{rdn(attribute{oidCN, str(asn1.TagInteger, []byte{5})})}, "CN=#020105"},
	{"empty", nil, ""},
}

func derOf(t *testing.T, rdns []attributeSET) []byte {
	t.Helper()
	if rdns == nil {
		rdns = []attributeSET{}
	}
	der, err := asn1.Marshal(rdns)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestDistinguishedName(t *testing.T) {
	for _, c := range dnCases {
		got, err := DistinguishedName(derOf(t, c.rdns))
		if err != nil || got != c.want {
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
	if _, err := DistinguishedName([]byte{0x30, 0x03, 0x31}); err == nil {
		t.Error("truncated DER accepted")
	}
}

func TestSubjectNameOfCertificate(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject: pkix.Name{
			CommonName:         "Duke, Jr.",
			OrganizationalUnit: []string{"JavaSoft"},
			Organization:       []string{"Sun Microsystems"},
			Country:            []string{"US"},
		},
		NotBefore: time.Now().Add(-time.Hour),
		NotAfter:  time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	got, err := SubjectName(cert)
	if want := `CN=Duke\, Jr.,OU=JavaSoft,O=Sun Microsystems,C=US`; err != nil || got != want {
		t.Errorf("SubjectName = %q, %v; want %q", got, err, want)
	}
	m, _ := ParseRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,RULE:^CN=((\\, *|[^,])+),OU=JavaSoft.*$/$1/L,DEFAULT`)
	if name, err := m.Name(got); err != nil || name != `duke\, jr.` {
		t.Errorf("mapped %q, %v", name, err)
	}
}

package secrets

import (
	"bytes"
	"strings"
	"testing"
)

// Built from pieces so the file itself holds no credential-shaped string.
var (
	awsKey    = "AKIA" + "IOSFODNN7EXAMPLE"
	ghToken   = "ghp" + "_" + strings.Repeat("a1B2", 9)
	ghPAT     = "github" + "_pat_" + strings.Repeat("x", 30)
	slackTok  = "xox" + "b-1234567890-abcdefghij"
	openaiKey = "sk" + "-proj-" + strings.Repeat("Ab3_", 8)
	antKey    = "sk" + "-ant-api03-" + strings.Repeat("z9", 15)
	googleKey = "AI" + "za" + strings.Repeat("S", 35)
	stripeKey = "sk" + "_live_" + strings.Repeat("4eC39", 4)
	stripeRK  = "rk" + "_live_" + strings.Repeat("4eC39", 4)
	pemBlock  = "-----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow\nAAAA\n-----END RSA " + "PRIVATE KEY-----"
	jwtTok    = "eyJ" + "hbGciOiJIUzI1NiJ9.eyJ" + "zdWIiOiIxIn0.sig_nature-x"
)

func TestFindKinds(t *testing.T) {
	cases := map[string]string{
		awsKey: KindAWS, ghToken: KindGitHub, ghPAT: KindGitHub, slackTok: KindSlack,
		openaiKey: KindOpenAI, antKey: KindAnthropic, googleKey: KindGoogle,
		stripeKey: KindStripe, stripeRK: KindStripe, pemBlock: KindPrivateKey, jwtTok: KindJWT,
	}
	for secret, kind := range cases {
		s := "before " + secret + " after"
		ms := Find([]byte(s))
		if len(ms) != 1 || ms[0].Kind != kind || s[ms[0].Start:ms[0].End] != secret {
			t.Errorf("%s: got %+v", kind, ms)
		}
		got, _ := Redact([]byte(s))
		if want := "before [redacted:" + kind + "] after"; string(got) != want {
			t.Errorf("%s: redacted %q, want %q", kind, got, want)
		}
	}
}

func TestNotSecrets(t *testing.T) {
	for _, s := range []string{
		"", "ask-me-anything please", "AKIA short", "task-" + strings.Repeat("a", 30),
		"the disk_live_ value", "eyJ alone", "eyJabc.notjwt", "-----BEGIN CERTIFICATE-----\nMII\n-----END CERTIFICATE-----",
		"AKIA" + strings.Repeat("A", 17), "sk-short", "xoxb-short",
	} {
		if ms := Find([]byte(s)); len(ms) != 0 {
			t.Errorf("%q: found %+v", s, ms)
		}
		if got, _ := Redact([]byte(s)); string(got) != s {
			t.Errorf("%q changed to %q", s, got)
		}
	}
}

func TestCutPrivateKeyIsRedactedToTheEnd(t *testing.T) {
	s := "key: -----BEGIN " + "PRIVATE KEY-----\nMIIEvQ"
	if got, _ := Redact([]byte(s)); string(got) != "key: [redacted:private_key]" {
		t.Fatalf("got %q", got)
	}
}

func FuzzRedact(f *testing.F) {
	for _, s := range []string{"", "hello", awsKey, "x " + ghToken + " y " + jwtTok, pemBlock, openaiKey + antKey, "sk-ant-", "-----BEGIN "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s := []byte(in)
		ms := Find(s)
		got, rms := Redact(s)
		if len(ms) == 0 {
			if !bytes.Equal(got, s) || Contains(s) {
				t.Fatalf("clean %q changed to %q", s, got)
			}
			return
		}
		if len(rms) != len(ms) || !Contains(s) {
			t.Fatalf("matches differ: %v %v", ms, rms)
		}
		last := 0
		for _, m := range ms {
			if m.Start < last || m.End <= m.Start || m.End > len(s) {
				t.Fatalf("bad match %+v in %q", m, s)
			}
			last = m.End
			if secret := s[m.Start:m.End]; len(secret) >= 8 && bytes.Contains(got, secret) {
				t.Fatalf("redacted %q still holds %q", got, secret)
			}
		}
	})
}

func BenchmarkContainsClean(b *testing.B) {
	s := []byte(strings.Repeat("The order ord_1234 shipped to Jane on 2026-01-02; status: delivered, sku=AB-12. ", 25))
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		if Contains(s) {
			b.Fatal("found")
		}
	}
}

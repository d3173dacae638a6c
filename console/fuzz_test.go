package console_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/console"
)

// FuzzParseTokens: ParseTokens reads any file without panicking; what it
// accepts has at least one token, every name and every token once, each
// token at least 16 bytes, none holding a space.
func FuzzParseTokens(f *testing.F) {
	f.Add("alice " + aliceToken + "\nbob " + bobToken + "\n")
	f.Add("# none\n\n")
	f.Add("alice short\n")
	f.Add("alice " + aliceToken + "\nalice " + bobToken)
	f.Fuzz(func(t *testing.T, in string) {
		ts, err := console.ParseTokens(strings.NewReader(in))
		if err != nil {
			if !errors.Is(err, console.ErrTokens) {
				t.Fatalf("ParseTokens: %v, want ErrTokens", err)
			}
			return
		}
		names, secrets := map[string]bool{}, map[string]bool{}
		for _, tok := range ts {
			if names[tok.Name] || secrets[tok.Secret] || len(tok.Secret) < 16 || strings.ContainsAny(tok.Name+tok.Secret, " \t\n") || tok.Name == "" {
				t.Fatalf("accepted %q as %+v", in, ts)
			}
			names[tok.Name], secrets[tok.Secret] = true, true
		}
		if len(ts) == 0 {
			t.Fatalf("accepted %q with no token", in)
		}
	})
}

package console

import (
	"bufio"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ErrTokens: a control token file that cannot be honoured (a line that is
// not NAME TOKEN, a name or a token given twice, no token at all).
var ErrTokens = errors.New("console: bad control token file")

// minTokenLen is the shortest token accepted: 16 bytes, so that a token
// is not guessed.
const minTokenLen = 16

// Token is one operator's bearer token: Name is who the recording says
// acted.
type Token struct {
	Name   string
	Secret string
}

// Tokens are the operators a window accepts. A plain value, only read.
type Tokens []Token

// ParseTokens reads a control token file: one `NAME TOKEN` a line (blank
// lines and lines beginning with # skipped). It refuses, with an error
// wrapping ErrTokens naming the line, a line of another shape, a name or
// a token given twice, a token shorter than 16 bytes, and a file with no
// token.
func ParseTokens(r io.Reader) (Tokens, error) {
	var ts Tokens
	names, secrets := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fs := strings.Fields(line)
		switch {
		case len(fs) != 2:
			return nil, fmt.Errorf("%w: line %d: want NAME TOKEN", ErrTokens, n)
		case names[fs[0]]:
			return nil, fmt.Errorf("%w: line %d: name %q given twice", ErrTokens, n, fs[0])
		case secrets[fs[1]]:
			return nil, fmt.Errorf("%w: line %d: the token of %q is another name's too", ErrTokens, n, fs[0])
		case len(fs[1]) < minTokenLen:
			return nil, fmt.Errorf("%w: line %d: the token of %q is shorter than %d bytes", ErrTokens, n, fs[0], minTokenLen)
		}
		names[fs[0]], secrets[fs[1]] = true, true
		ts = append(ts, Token{Name: fs[0], Secret: fs[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokens, err)
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("%w: no token", ErrTokens)
	}
	return ts, nil
}

// who is the name of the token secret is, "" for none. Every token is
// compared, each in constant time, whatever matched: the time taken says
// nothing of which token, or how much of one, matched.
func (ts Tokens) who(secret string) string {
	name := ""
	for _, t := range ts {
		if subtle.ConstantTimeCompare([]byte(t.Secret), []byte(secret)) == 1 {
			name = t.Name
		}
	}
	return name
}

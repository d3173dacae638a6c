package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadToken(t *testing.T) {
	for _, tc := range []struct {
		name, file, want string // want "NAME TOKEN", "" for an error
		usage            bool
	}{
		{name: "", file: "alice a1\nbob b2\n", want: "alice a1"},
		{name: "bob", file: "alice a1\nbob b2\n", want: "bob b2"},
		{name: "", file: "# ops\n\n  alice\ta1  \n", want: "alice a1"},
		{name: "", file: "bob b2", want: "bob b2"},
		{name: "carol", file: "alice a1\n", usage: true},
		{name: "", file: "", want: ""},
		{name: "", file: "# only a comment\n", want: ""},
		{name: "", file: "alice\n", want: ""},
		{name: "", file: "alice a1 extra\n", want: ""},
		{name: "", file: "alice a1\nalice a2\n", want: ""},
	} {
		p := filepath.Join(t.TempDir(), "tokens")
		if err := os.WriteFile(p, []byte(tc.file), 0o600); err != nil {
			t.Fatal(err)
		}
		name, token, err := readToken(p, tc.name)
		got := ""
		if err == nil {
			got = name + " " + token
		}
		var ue *usageError
		if got != tc.want || (err != nil) != (tc.want == "") || errors.As(err, &ue) != tc.usage {
			t.Errorf("readToken(%q, %q) = %q, %v; want %q (usage error %v)", tc.file, tc.name, got, err, tc.want, tc.usage)
		}
		if err != nil && (strings.Contains(err.Error(), "a1") || strings.Contains(err.Error(), "a2")) {
			t.Errorf("readToken(%q): the error quotes a token: %v", tc.file, err)
		}
	}
}

// FuzzReadToken: a token file is untrusted bytes. readToken never panics,
// and a token it returns is the second field of a line NAME TOKEN of the
// file.
func FuzzReadToken(f *testing.F) {
	for _, s := range []string{"alice a1\n", "# c\nbob b2\n", "x\n", "a b c\n", "a b\na c\n", "\x00 \xff\n"} {
		f.Add(s, "")
		f.Add(s, "bob")
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, file, name string) {
		p := filepath.Join(dir, "tokens")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		n, token, err := readToken(p, name)
		if err != nil {
			return
		}
		if token == "" || (name != "" && n != name) {
			t.Fatalf("readToken(%q, %q) = %q, %q", file, name, n, token)
		}
		for _, line := range strings.Split(file, "\n") {
			if fl := strings.Fields(line); len(fl) == 2 && fl[0] == n && fl[1] == token {
				return
			}
		}
		t.Fatalf("readToken(%q, %q) = %q, %q: no such line", file, name, n, token)
	})
}

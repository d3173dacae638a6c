package cli_test

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
)

// helpBlock is a help block of docs/CLI.md: a marker naming the command,
// then a fenced block holding its --help output.
var helpBlock = regexp.MustCompile("(?s)<!-- help: ([a-z ]+) -->\n```\n(.*?)```\n")

// TestCLIDocMatchesHelp checks that every help block of docs/CLI.md is
// the command's --help output, and that every command has one. -update
// rewrites the blocks.
func TestCLIDocMatchesHelp(t *testing.T) {
	const path = "../../docs/CLI.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	seen := map[string]bool{}
	changed := false
	doc = helpBlock.ReplaceAllStringFunc(doc, func(block string) string {
		m := helpBlock.FindStringSubmatch(block)
		name, want := m[1], m[2]
		seen[name] = true
		var out bytes.Buffer
		args := append(strings.Fields(name), "--help")
		if code := newCLI(&out).Execute(context.Background(), args); code != 0 {
			t.Errorf("blackbox %s --help: exit %d", name, code)
		}
		if out.String() == want {
			return block
		}
		changed = true
		if !*update {
			t.Errorf("docs/CLI.md: the help of %q differs from `blackbox %s --help`:\n%s", name, name, out.String())
		}
		return "<!-- help: " + name + " -->\n```\n" + out.String() + "```\n"
	})
	var root bytes.Buffer
	for _, c := range newCLI(&root).Command().Commands() {
		names := []string{c.Name()}
		if c.HasSubCommands() {
			names = nil
			for _, s := range c.Commands() {
				names = append(names, c.Name()+" "+s.Name())
			}
		}
		for _, n := range names {
			if !seen[n] && c.Name() != "help" {
				t.Errorf("docs/CLI.md has no help block for %q", n)
			}
		}
	}
	if *update && changed {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

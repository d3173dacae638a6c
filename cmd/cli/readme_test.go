package cli_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeTourIsTested checks that every blackbox command of the README's
// tour is a command of testdata/tour.txt, and that the tour's input file is
// the one the transcript uses.
func TestReadmeTourIsTested(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The tour's commands are run by tour.txt, its workers step by
	// workers.txt (which the README names there).
	tested := map[string]bool{}
	for _, name := range []string{"testdata/tour.txt", "testdata/workers.txt"} {
		cmds, _ := readTranscript(t, name)
		for _, c := range cmds {
			tested[c] = true
		}
	}
	text := string(readme)
	start := strings.Index(text, "## A five-minute tour")
	end := strings.Index(text, "## Your own processor")
	if start < 0 || end < start {
		t.Fatal("README.md has no tour section")
	}
	tour := text[start:end]
	n := 0
	for _, m := range regexp.MustCompile(`(?m)^\$ ((?:blackbox|echo|truncate) .*)$`).FindAllStringSubmatch(tour, -1) {
		if m[1] == "echo $?" { // the exit code, checked by the transcript's [exit N]
			continue
		}
		n++
		if !tested[m[1]] {
			t.Errorf("README tour command %q is not in testdata/tour.txt or workers.txt", m[1])
		}
	}
	if n < 8 {
		t.Errorf("found %d tour commands in README.md", n)
	}
	m := regexp.MustCompile(`printf '([^']*)' > payments.txt`).FindStringSubmatch(tour)
	if m == nil {
		t.Fatal("README tour does not create payments.txt")
	}
	want := strings.ReplaceAll(m[1], `\n`, "\n")
	if _, files := readTranscript(t, "testdata/tour.txt"); files["payments.txt"] != want {
		t.Errorf("README's payments.txt:\n%s\ntour.txt's:\n%s", want, files["payments.txt"])
	}
}

package replayer_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// TestReplayBuildsEachProcessorWithItsRecordedOptions: a recording whose
// META holds the options of its streams replays identical with none given;
// an option given replaces the recorded one key by key and the report
// names it; a recording that holds none (an earlier version's) is replayed
// with only the options given.
func TestReplayBuildsEachProcessorWithItsRecordedOptions(t *testing.T) {
	lines := []string{"alice,5", "bob,7", "carol,2"} // threshold 5: two alerts; the default 1000: none
	five := map[string]string{"threshold": "5"}
	for _, tc := range []struct {
		name      string
		recorded  bool
		given     map[string]string
		identical bool
		options   map[string]string
		over      []replayer.Override
	}{
		{"recorded, none given", true, nil, true, five, nil},
		{"recorded, the same given", true, five, true, five, nil},
		{"recorded, another given", true, map[string]string{"threshold": "1000"}, false, map[string]string{"threshold": "1000"},
			[]replayer.Override{{Key: "threshold", Given: "1000", Recorded: "5"}}},
		{"not recorded, none given", false, nil, false, map[string]string{}, nil},
		{"not recorded, given", false, five, true, five, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := run{procs: []string{"alerts"}, options: five, recordOptions: tc.recorded}.memory(t, lines...)
			var opts replayer.Options
			if tc.given != nil {
				opts.AppOptions = map[string]map[string]string{"alerts": tc.given}
			}
			rep := replay(t, m, opts)
			if rep.Identical != tc.identical {
				t.Errorf("identical %v, want %v:\n%s", rep.Identical, tc.identical, text(t, rep))
			}
			p := rep.Processors[0]
			if !maps.Equal(p.Options, tc.options) || p.OptionsRecorded != tc.recorded || !slices.Equal(p.Overridden, tc.over) {
				t.Errorf("options %v recorded %v overridden %+v, want %v %v %+v", p.Options, p.OptionsRecorded, p.Overridden,
					tc.options, tc.recorded, tc.over)
			}
		})
	}
}

// TestReplayWithAnotherAppIgnoresTheRecordedOptions: the options a recording
// holds are its app's; a replay with another app (Options.App) builds it
// with only the options given.
func TestReplayWithAnotherAppIgnoresTheRecordedOptions(t *testing.T) {
	m := run{procs: []string{"alerts"}, options: map[string]string{"threshold": "5"}, recordOptions: true}.memory(t, "alice,5")
	rep := replay(t, m, replayer.Options{App: "ledger"}) // the ledger takes no threshold: built, it diverges; refused, it stops
	p := rep.Processors[0]
	if p.OptionsRecorded || len(p.Options) != 0 || p.StopKind == replayer.StopError {
		t.Errorf("replayed with another app: options %v recorded %v, stop %q (%s)", p.Options, p.OptionsRecorded, p.StopKind, p.Stop)
	}
}

// TestDiffSaysWhenTheSidesWereBuiltWithOtherOptions: each side's recorded
// options are in the report, and the text notes when they differ; the
// outputs alone decide the verdict.
func TestDiffSaysWhenTheSidesWereBuiltWithOtherOptions(t *testing.T) {
	lines := []string{"alice,5", "bob,7"}
	five := run{procs: []string{"alerts"}, options: map[string]string{"threshold": "5"}, recordOptions: true}.memory(t, lines...)
	high := run{procs: []string{"alerts"}, options: map[string]string{"threshold": "100"}, recordOptions: true}.memory(t, lines...)
	rep := diff(t, []store.Reader{five}, []store.Reader{high}, ignoreAt)
	p := rep.Processors[0]
	if p.OptionsA["threshold"] != "5" || p.OptionsB["threshold"] != "100" || rep.Verdict != replayer.DiffDifferent {
		t.Errorf("options A %v B %v, verdict %q; want threshold 5 and 100, different", p.OptionsA, p.OptionsB, rep.Verdict)
	}
	if want := "note: the app was built with other options: A threshold=5, B threshold=100"; !strings.Contains(diffText(t, rep), want) {
		t.Errorf("text lacks %q:\n%s", want, diffText(t, rep))
	}
	if same := diff(t, []store.Reader{five}, []store.Reader{five}, ignoreAt); strings.Contains(diffText(t, same), "other options") {
		t.Errorf("a recording against itself notes other options:\n%s", diffText(t, same))
	}
}

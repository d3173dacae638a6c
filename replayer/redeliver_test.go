package replayer_test

import (
	"testing"

	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// TestDiffExplainsARedeliveryOnlyWhereNothingCommittedIt: side A is two
// runs of the ledger, the first over lines 1-6, the second over all ten
// (lines 1-6 delivered again); B is a clean run of the ten. Whether the
// re-delivery of lines 1-6 is explained (processed twice, once per run:
// same) or not (processed more often than the runs explain: different)
// depends on what the runs committed and on whether they ran one after
// another or at the same time (a group's members): a source delivers
// again only what was not committed, so a re-delivery a COMMIT covered is
// never explained; of concurrent runs, at most one of the runs that
// delivered an input may have committed it (the last to take it).
func TestDiffExplainsARedeliveryOnlyWhereNothingCommittedIt(t *testing.T) {
	all := run{}.memory(t, ten...)
	clean := run{}.memory(t, ten...)
	first := func(kinds ...store.Kind) store.Reader { return without(t, run{}.memory(t, ten[:6]...), kinds...) }
	for _, tc := range []struct {
		name       string
		first      store.Reader
		second     store.Reader
		concurrent bool
		want       replayer.DiffVerdict
		twice      int64
		repeated   int64
	}{
		{"killed before it committed, then restarted", first(store.KindEnd, store.KindCommit), all, false, replayer.DiffSame, 6, 0},
		{"killed after it committed, then restarted", first(store.KindEnd), all, false, replayer.DiffDifferent, 0, 6},
		{"stopped cleanly, its commits lost, then restarted", first(store.KindCommit), all, false, replayer.DiffSame, 6, 0},
		{"stopped cleanly after it committed, then restarted", first(), all, false, replayer.DiffDifferent, 0, 6},
		{"restarted after a run that committed, which did not commit", first(), without(t, all, store.KindCommit), false, replayer.DiffDifferent, 0, 6},
		{"members: the first committed, the second did not", first(), without(t, all, store.KindCommit), true, replayer.DiffSame, 6, 0},
		{"members: the second committed, the first did not", first(store.KindCommit), all, true, replayer.DiffSame, 6, 0},
		{"members: neither committed", first(store.KindCommit), without(t, all, store.KindCommit), true, replayer.DiffSame, 6, 0},
		{"members: both committed", first(), all, true, replayer.DiffDifferent, 0, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var opts replayer.DiffOptions
			opts.Concurrent[0] = tc.concurrent
			rep := diff(t, []store.Reader{tc.first, tc.second}, []store.Reader{clean}, opts)
			c := rep.Processors[0].Counts
			if rep.Verdict != tc.want || c.Twice != tc.twice || c.Repeated != tc.repeated {
				t.Errorf("verdict %q, %d twice, %d repeated; want %q, %d, %d:\n%s", rep.Verdict, c.Twice, c.Repeated, tc.want, tc.twice, tc.repeated, diffText(t, rep))
			}
		})
	}
}

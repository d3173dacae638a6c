package storetest

import (
	"errors"
	"testing"

	"github.com/blackbox-audit/blackbox/store"
	"github.com/google/go-cmp/cmp"
)

// want is the part of a Problem every store must agree on.
type want struct {
	Kind      store.ProblemKind
	Processor string
	Index     int64
	Row       store.Kind
}

func wantsOf(ps []store.Problem) []want {
	out := make([]want, 0, len(ps))
	for _, p := range ps {
		out = append(out, want{p.Kind, p.Processor, p.Index, p.Row})
	}
	return out
}

// checkProblems opens the recording at p and checks that its Problems are
// wants and that the recording opened again (Verify) finds the same; it
// returns the store and its problems.
func checkProblems(t *testing.T, b Backend, p string, wants []want) (Store, []store.Problem) {
	t.Helper()
	s := open(t, b, p)
	ps := s.Problems()
	if d := cmp.Diff(wants, wantsOf(ps)); d != "" {
		t.Errorf("Problems (-want +got):\n%s\ngot: %v", d, ps)
	}
	if d := cmp.Diff(ps, reopened(t, b, p)); d != "" {
		t.Errorf("Verify differs from Problems (-problems +verify):\n%s", d)
	}
	return s, ps
}

type corruption func(c Corrupter, path string) error

func del(rows ...int64) corruption {
	return func(c Corrupter, p string) error {
		// Delete from the last, so the positions stay those of Recording.
		for i := len(rows) - 1; i >= 0; i-- {
			if err := c.DeleteRow(p, rows[i]); err != nil {
				return err
			}
		}
		return nil
	}
}

func set(row int64, column, value string) corruption {
	return func(c Corrupter, p string) error { return c.SetField(p, row, column, value) }
}

// all applies every corruption in turn.
func all(cs ...corruption) corruption {
	return func(c Corrupter, p string) error {
		for _, f := range cs {
			if err := f(c, p); err != nil {
				return err
			}
		}
		return nil
	}
}

func truncate(n int64) corruption {
	return func(c Corrupter, p string) error { return c.Truncate(p, n) }
}

// testProblems runs the corruption table against a backend: each case a
// recording, a corruption and the problems every reader must report. It is
// over 100 lines because it is one table, read case by case; splitting it
// would scatter the cases, not simplify them.
func testProblems(t *testing.T, b Backend) {
	c, ok := b.(Corrupter)
	if !ok {
		t.Skip("backend is not a Corrupter")
	}
	const (
		torn         = store.ProblemTorn
		orphan       = store.ProblemOrphan
		gap          = store.ProblemGap
		unfinished   = store.ProblemUnfinished
		missing      = store.ProblemMissingJournal
		malformed    = store.ProblemMalformed
		missingInput = store.ProblemMissingInput
	)
	tests := []struct {
		name    string
		corrupt corruption
		want    []want
		// unreadable: the malformed wants are rows that cannot be read,
		// which Rows yields as errors.
		unreadable bool
	}{
		{"torn END", truncate(5), []want{
			{unfinished, Alerts, 8, store.KindLost},
			{torn, Alerts, 9, store.KindEnd},
		}, false},
		{"missing JOURNAL", del(3), []want{
			{gap, "", 3, ""},
			{missing, "ledger", 7, store.KindIndexed},
		}, false},
		{"missing input: orphan DELIVERY and OUTPUT", del(7), []want{
			{orphan, "ledger", 2, store.KindDelivery},
			{gap, "ledger", 3, ""},
			{orphan, "ledger", 4, store.KindOutput},
			{orphan, "ledger", 5, store.KindOutput},
			{gap, "ledger", 15, store.KindEnd},         // END counts 5 inputs of 4
			{missingInput, "ledger", 0, store.KindEnd}, // seq 1, at the last END
		}, false},
		{"missing input before END: orphan DELIVERY", del(25), []want{
			{orphan, "ledger", 13, store.KindDelivery},
			{gap, "ledger", 14, ""},
			{gap, "ledger", 15, store.KindEnd},
			{missingInput, "ledger", 0, store.KindEnd}, // seq 3
		}, false},
		{"missing OUTPUT", del(9), []want{
			{orphan, "ledger", 3, store.KindIndexed},
			{gap, "ledger", 5, ""},
		}, false},
		{"missing DELIVERY", del(13), []want{
			{gap, "ledger", 6, ""},
		}, false},
		{"missing START", del(5), []want{
			{gap, Alerts, 2, store.KindDelivery},
		}, false},
		{"missing END", del(28), []want{
			{unfinished, "ledger", 14, store.KindIndexed},
		}, false},
		{"missing META", del(1), []want{
			{malformed, "", 2, store.KindJournal},
			{gap, "", 1, ""},
		}, false},
		{"extra OUTPUT", set(7, "n", "1"), []want{
			{orphan, "ledger", 5, store.KindOutput},
		}, false},
		{"OUTPUT beyond n", set(9, "seq", "3"), []want{
			{orphan, "ledger", 3, store.KindIndexed},
			{orphan, "ledger", 5, store.KindOutput},
		}, false},
		{"unknown kind", set(8, "kind", "BOGUS"), []want{
			{malformed, "ledger", 4, ""},
		}, true},
		{"bad number", set(8, "seq", "x"), []want{
			{malformed, "ledger", 4, store.KindOutput},
		}, true},
		{"index skipped", set(28, "index", "16"), []want{
			{gap, "ledger", 15, ""},
		}, false},
		{"row after END", all(set(25, "kind", "END"), set(25, "source", ""), set(25, "seq", "0"), set(25, "payload", ""),
			set(25, "reads", "")), []want{
			{orphan, "ledger", 13, store.KindDelivery},
			{gap, "ledger", 14, store.KindEnd}, // END counts 0 inputs of 4
			{orphan, "ledger", 15, store.KindEnd},
			{missingInput, "ledger", 0, store.KindEnd}, // seq 3
		}, false},
		{"DELIVERY of another input", set(6, "seq", "9"), []want{
			{orphan, "ledger", 2, store.KindDelivery},
		}, false},
		// Numbers the format forbids, payload texts no writer writes.
		{"DROPPED of no item", set(16, "n", "0"), []want{
			{malformed, Alerts, 4, store.KindDropped},
		}, true},
		{"DROPPED of -1 items", set(16, "n", "-1"), []want{
			{malformed, Alerts, 4, store.KindDropped},
		}, true},
		{"negative offset", set(6, "offset", "-1"), []want{
			{malformed, "ledger", 2, store.KindDelivery},
		}, true},
		{"negative seq", set(13, "seq", "-2"), []want{
			{malformed, "ledger", 6, store.KindDelivery},
		}, true},
		{"negative outputs", set(25, "n", "-1"), []want{
			{malformed, "ledger", 14, store.KindIndexed},
		}, true},
		{"END of -1 inputs", set(28, "n", "-1"), []want{
			{malformed, "ledger", 15, store.KindEnd},
			{unfinished, "ledger", 15, store.KindEnd},
		}, true},
		{"END's count edited", set(28, "n", "4"), []want{
			{gap, "ledger", 15, store.KindEnd},
		}, false},
		{"payload not base64", set(8, "payload", "~not base64!"), []want{
			{malformed, "ledger", 4, store.KindOutput},
		}, true},
		{"payload in base64 that needs none", set(8, "payload", "~e30="), []want{
			{malformed, "ledger", 4, store.KindOutput},
		}, true},
		{"raw NUL in a payload", set(8, "payload", "{\x00}"), []want{
			{malformed, "ledger", 4, store.KindOutput},
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := path(t)
			Write(t, b, p, Recording())
			if err := tt.corrupt(c, p); errors.Is(err, errors.ErrUnsupported) {
				t.Skipf("backend cannot: %v", err)
			} else if err != nil {
				t.Fatal(err)
			}
			checkStreams(t, b, p)
			s, ps := checkProblems(t, b, p, tt.want)
			for i := range ps {
				var err error = &ps[i]
				var p *store.Problem
				if !errors.As(err, &p) || !errors.Is(err, sentinel(p.Kind)) {
					t.Errorf("problem %v: errors.Is(%v) = false", err, sentinel(p.Kind))
				}
				if p.Line <= 0 || p.Detail == "" {
					t.Errorf("problem %v: no line or no detail", err)
				}
			}
			// A malformed or torn row is yielded by Rows as a *Problem.
			_, errs := ReadAll(s)
			var gotErrs []want
			for _, err := range errs {
				var p *store.Problem
				if !errors.As(err, &p) {
					t.Fatalf("Rows error %v is not a *store.Problem", err)
				}
				gotErrs = append(gotErrs, want{p.Kind, p.Processor, p.Index, p.Row})
			}
			var wantErrs []want
			for _, w := range tt.want {
				if w.Kind == torn || (w.Kind == malformed && tt.unreadable) {
					wantErrs = append(wantErrs, w)
				}
			}
			if d := cmp.Diff(wantErrs, gotErrs); d != "" {
				t.Errorf("Rows errors (-want +got):\n%s", d)
			}
			// A recording with problems is read-only.
			if err := s.Append(Recording()[0]); !errors.Is(err, store.ErrReadOnly) {
				t.Errorf("Append to a recording with problems: %v, want ErrReadOnly", err)
			}
		})
	}
}

func sentinel(k store.ProblemKind) error {
	return (&store.Problem{Kind: k}).Unwrap()
}

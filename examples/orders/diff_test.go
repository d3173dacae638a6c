package orders_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/examples/orders"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

func diff(t *testing.T, a, b store.Reader) *replayer.DiffReport {
	t.Helper()
	d, err := replayer.Diff(context.Background(), []store.Reader{a}, []store.Reader{b}, replayer.DiffOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTwoRunsOfTheSameVersionDiffSame(t *testing.T) {
	options := map[string]string{orders.OptionLimit: "100.00"}
	d := diff(t, recordMemory(t, inputFile, options), recordMemory(t, inputFile, options))
	if !d.Same || d.Verdict != replayer.DiffSame {
		var b strings.Builder
		_ = d.WriteText(&b)
		t.Errorf("verdict %q, want %q:\n%s", d.Verdict, replayer.DiffSame, b.String())
	}
}

// A run of the changed version (limit 50.00) differs from a run of the old
// one (limit 100.00) exactly at the orders whose alerts the limit moves:
// o3 and o5 (over 50.00) and o6 (over 100.00).
func TestARunOfAChangedVersionDiffersAtTheOrdersItsLimitMoves(t *testing.T) {
	d := diff(t, recordMemory(t, inputFile, map[string]string{orders.OptionLimit: "100.00"}),
		recordMemory(t, inputFile, map[string]string{orders.OptionLimit: "50.00"}))
	if d.Same || d.Verdict != replayer.DiffDifferent {
		t.Fatalf("verdict %q, want %q", d.Verdict, replayer.DiffDifferent)
	}
	p := d.Processors[0]
	var seqs []int64
	var inputs []string
	for _, x := range p.Different {
		seqs = append(seqs, x.Seq)
		inputs = append(inputs, x.Input)
	}
	if diff := cmp.Diff([]int64{seqO3, seqO5, seqO6}, seqs); diff != "" {
		t.Errorf("different inputs' seqs (-want +got):\n%s\ninputs: %q", diff, inputs)
	}
	if len(p.OnlyA) != 0 || len(p.OnlyB) != 0 {
		t.Errorf("inputs on one side only: A %v, B %v", p.OnlyA, p.OnlyB)
	}
}

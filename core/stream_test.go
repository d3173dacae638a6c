package core_test

import (
	"testing"

	"github.com/blackbox-audit/blackbox/core"
)

func TestParseWorkerStreamReadsWhatWorkerStreamWrites(t *testing.T) {
	type parsed struct {
		Processor string
		Worker    int
		OK        bool
	}
	for _, tc := range []struct {
		stream string
		want   parsed
	}{
		{core.WorkerStream("ledger", 0), parsed{"ledger", 0, true}},
		{core.WorkerStream("ledger", 12), parsed{"ledger", 12, true}},
		{core.WorkerStream("a#w1", 3), parsed{"a#w1", 3, true}},
		{"ledger", parsed{}},
		{"ledger#w", parsed{}},
		{"ledger#w01", parsed{}},
		{"ledger#w-1", parsed{}},
		{"ledger#w1x", parsed{}},
		{"ledger#x1", parsed{}},
		{"#w1", parsed{}},
		{"ledger#w99999999999999999999999", parsed{}},
	} {
		var got parsed
		got.Processor, got.Worker, got.OK = core.ParseWorkerStream(tc.stream)
		if got != tc.want {
			t.Errorf("ParseWorkerStream(%q) = %+v, want %+v", tc.stream, got, tc.want)
		}
	}
}

func FuzzParseWorkerStream(f *testing.F) {
	for _, s := range []string{"ledger#w0", "ledger#w12", "ledger", "#w1", "a#w1#w2", "x#w007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, w, ok := core.ParseWorkerStream(s)
		if !ok {
			return
		}
		if got := core.WorkerStream(p, w); got != s {
			t.Fatalf("ParseWorkerStream(%q) = %q, %d: WorkerStream writes %q", s, p, w, got)
		}
		if p2, w2, ok2 := core.ParseWorkerStream(core.WorkerStream(s, 5)); !ok2 || p2 != s || w2 != 5 {
			t.Fatalf("worker 5 of %q parses as %q, %d, %v", s, p2, w2, ok2)
		}
	})
}

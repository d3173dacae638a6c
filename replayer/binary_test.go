package replayer_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/memsource"
	"github.com/blackbox-audit/blackbox/internal/storetest"
	"github.com/blackbox-audit/blackbox/recorder"
	"github.com/blackbox-audit/blackbox/replayer"
	"github.com/blackbox-audit/blackbox/store"
)

// indented is a stateful processor whose snapshot is indented JSON (line
// breaks) followed by raw bytes no text format holds: a count of its
// inputs, emitted with each input.
type indented struct{ N int }

func (p *indented) OnEvent(c *core.Cycle, ev any) error {
	p.N++
	c.Emit("out", map[string]any{"n": p.N, "line": ev})
	return nil
}

func (p *indented) Snapshot() ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	return append(b, '\r', 0, 0xff, '\n'), err
}

func (p *indented) Restore(b []byte) error { return json.Unmarshal(b[:len(b)-4], p) }

// TestASnapshotAndPayloadsWithLineBreaksAreRecordedAndReplay: issue 13
// case 1. A snapshot of any bytes (indented JSON, a CR, a NUL, invalid
// UTF-8) and an input with a line break are recorded, in CSV and in
// SQLite, and the recording replays identical, complete and lossless. On
// the old format the recorder could not write START and the recording held
// only META, which replay called proven.
func TestASnapshotAndPayloadsWithLineBreaksAreRecordedAndReplay(t *testing.T) {
	for _, b := range []struct {
		name, ext string
		backend   storetest.Backend
	}{{"csv", ".csv", storetest.CSV}, {"sqlite", ".db", storetest.SQLite}} {
		t.Run(b.name, func(t *testing.T) {
			m := store.NewMemory()
			// The engine run is in a synctest bubble: its timers are on the
			// bubble's clock.
			synctest.Test(t, func(t *testing.T) { recordIndented(t, m) })
			if t.Failed() {
				t.FailNow()
			}
			ctx := context.Background()
			r := storetest.Reopen(t, b.backend, filepath.Join(t.TempDir(), "r"+b.ext), m.ReadOnly())
			if ps := r.Problems(); len(ps) != 0 {
				t.Fatalf("problems: %v", ps)
			}
			apps := []core.App{{Name: "indented",
				New:    func(map[string]string) (core.Processor, error) { return &indented{}, nil },
				Decode: recorder.JSON.Decode,
			}}
			rep, err := replayer.Replay(ctx, r, apps, replayer.Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := [3]bool{rep.Identical, rep.Complete, rep.Lossless}
			if got != [3]bool{true, true, true} || len(rep.Processors) != 1 || rep.Processors[0].Outputs != 2 {
				t.Fatalf("identical, complete, lossless = %v, processors %+v; want all true and 2 outputs compared", got, rep.Processors)
			}
		})
	}
}

// recordIndented records a run of indented over two inputs with line breaks
// into m, and fails unless it is lossless and the recorder whole.
func recordIndented(t *testing.T, m *store.Memory) {
	t.Helper()
	rec, err := recorder.New(m, recorder.Options{
		Clock: core.NewStepClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Second),
		Apps:  map[string]string{"p": "indented"},
	})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Feeds: []engine.FeedConfig{{Name: "in", Source: memsource.NewList("one\ntwo", "three\r\n"),
			Policy: engine.BlockWithDeadline(time.Second), QueueSize: 8}},
		Groups: []engine.GroupConfig{{Name: "g", Feeds: []string{"in"},
			Processors: []engine.ProcessorConfig{{Name: "p", Processor: &indented{N: 40}}}}},
		Observer: rec.Observer(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the bubble's seconds
	defer cancel()
	st, err := e.WaitSettled(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil || !st.Lossless {
		t.Fatalf("recorder: %v, lossless %v", err, st.Lossless)
	}
}

package apps_test

import (
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/internal/apps"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// at is the RFC 3339 stamp of the clock's i-th reading (from 0).
func at(i int) string { return t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano) }

func post(account string, amount, balance int64, at string) apps.Posting {
	return apps.Posting{Account: account, Amount: amount, Balance: balance, At: at}
}

func rej(line, reason string) apps.Rejected { return apps.Rejected{Rejected: line, Reason: reason} }

func alert(account string, amount int64, at string) apps.Alert {
	return apps.Alert{Account: account, Amount: amount, At: at}
}

func host(p core.Processor) *core.Host {
	return core.NewHost("p", p, core.NewStepClock(t0, time.Millisecond))
}

// handle runs one input through h under d and then its completions, as the
// engine does; it returns the outputs.
func handle(t *testing.T, h *core.Host, d *core.Delivery, ev any) ([]any, error) {
	t.Helper()
	tr := h.Handle(d, ev)
	if tr.Err != nil {
		return nil, tr.Err
	}
	outs := outputs(t, tr)
	for _, c := range tr.Completions {
		if err := c.Complete(d); err != nil {
			t.Fatalf("completion: %v", err)
		}
	}
	return outs, nil
}

func outputs(t *testing.T, tr *core.Trace) []any {
	t.Helper()
	var outs []any
	for _, o := range tr.Outputs {
		if o.Sink != apps.LedgerSink && o.Sink != apps.AlertsSink {
			t.Errorf("output to sink %q", o.Sink)
		}
		outs = append(outs, o.Value)
	}
	return outs
}

func newLedger(t *testing.T, opts apps.LedgerOptions) *apps.Ledger {
	t.Helper()
	l, err := apps.NewLedger(opts)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestLedgerLines: each kind of line, in order, on one ledger: outputs
// (clock readings included) and the state after it.
func TestLedgerLines(t *testing.T) {
	l := newLedger(t, apps.LedgerOptions{})
	h := host(l)
	tests := []struct {
		line     string
		want     []any
		balances map[string]int64
	}{
		{"alice,100", []any{post("alice", 100, 100, at(0))}, map[string]int64{"alice": 100}},
		{" bob , -30 ", []any{post("bob", -30, -30, at(1))}, map[string]int64{"alice": 100, "bob": -30}},
		{"transfer,alice,bob,40", []any{post("alice", -40, 60, at(2)), post("bob", 40, 10, at(3))},
			map[string]int64{"alice": 60, "bob": 10}},
		{"alice", []any{rej("alice", "want account,amount")}, nil},
		{"alice,1.5", []any{rej("alice,1.5", `amount "1.5" is not a 64-bit integer`)}, nil},
		{",5", []any{rej(",5", "empty account")}, nil},
		{"", []any{rej("", "empty line")}, nil},
		{"a,b,c", []any{rej("a,b,c", "want account,amount")}, nil},
		{"transfer,alice,bob", []any{rej("transfer,alice,bob", "want transfer,from,to,amount")}, nil},
		{"transfer,alice,bob,-1", []any{rej("transfer,alice,bob,-1", "transfer amount must be positive")}, nil},
		{"transfer,alice,,1", []any{rej("transfer,alice,,1", "empty account")}, nil},
		{"alice,9223372036854775807", []any{rej("alice,9223372036854775807", "balance overflow")}, nil},
		{"carol,0", []any{post("carol", 0, 0, at(4))}, map[string]int64{"alice": 60, "bob": 10, "carol": 0}},
	}
	balances := map[string]int64{}
	for _, tt := range tests {
		got, err := handle(t, h, nil, tt.line)
		if err != nil {
			t.Fatalf("%q: %v", tt.line, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q outputs (-want +got):\n%s", tt.line, diff)
		}
		if tt.balances != nil {
			balances = tt.balances
		}
		if diff := cmp.Diff(balances, l.State().Balances); diff != "" {
			t.Errorf("after %q balances (-want +got):\n%s", tt.line, diff)
		}
	}
	if got := l.State().Applied; got != 5 {
		t.Errorf("applied = %d, want 5 (a transfer is two postings)", got)
	}
}

// TestLedgerTimerAndFail: tick sets a timer whose cycle emits the summary;
// fail fails every time and changes nothing.
func TestLedgerTimerAndFail(t *testing.T) {
	l := newLedger(t, apps.LedgerOptions{})
	h := host(l)
	for _, line := range []string{"a,10", "b,-3"} {
		if _, err := handle(t, h, nil, line); err != nil {
			t.Fatal(err)
		}
	}
	before := l.State()
	for range 2 {
		if _, err := handle(t, h, nil, "fail"); !errors.Is(err, apps.ErrFailLine) {
			t.Errorf("fail: err = %v, want ErrFailLine", err)
		}
	}
	if diff := cmp.Diff(before, l.State()); diff != "" {
		t.Errorf("fail changed the state (-before +after):\n%s", diff)
	}
	if got, _ := handle(t, h, nil, "tick"); len(got) != 0 {
		t.Errorf("tick emitted %v", got)
	}
	if !h.PendingTimer(1) {
		t.Fatal("tick set no timer 1")
	}
	tr := h.Fire(1)
	if tr.Err != nil {
		t.Fatal(tr.Err)
	}
	want := []any{apps.Summary{Timer: 1, Accounts: 2, Total: 7}}
	if diff := cmp.Diff(want, outputs(t, tr)); diff != "" {
		t.Errorf("timer (-want +got):\n%s", diff)
	}
}

// TestLedgerReentrantTransfer: a positioned transfer runs three cycles
// under one delivery; the save is registered once and the position is
// recorded only when the delivery completes, after both postings.
func TestLedgerReentrantTransfer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	l := newLedger(t, apps.LedgerOptions{StatePath: path})
	h := host(l)
	d := &core.Delivery{Feed: "input", Sequence: 1, Epoch: 3, Position: core.Position{Offset: 22}}
	tr := h.Handle(d, "transfer,a,b,5")
	if tr.Err != nil || tr.Cycles != 3 || len(tr.Outputs) != 2 || len(tr.Completions) != 1 {
		t.Fatalf("trace: err %v, %d cycles, %d outputs, %d completions; want nil, 3, 2, 1",
			tr.Err, tr.Cycles, len(tr.Outputs), len(tr.Completions))
	}
	if st := l.State(); st.Offset != 0 || st.Applied != 2 {
		t.Errorf("before completion: offset %d applied %d, want 0, 2", st.Offset, st.Applied)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state saved before completion (%v)", err)
	}
	if err := tr.Completions[0].Complete(d); err != nil {
		t.Fatal(err)
	}
	want := apps.LedgerState{Balances: map[string]int64{"a": -5, "b": 5}, Applied: 2, Epoch: 3, Offset: 22}
	if diff := cmp.Diff(want, readState(t, path)); diff != "" {
		t.Errorf("saved state (-want +got):\n%s", diff)
	}
}

func readState(t *testing.T, path string) apps.LedgerState {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st apps.LedgerState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file %s: %v", b, err)
	}
	return st
}

// TestLedgerAlreadyAppliedAcrossRestart: a ledger saves (epoch, offset)
// with its state; a new ledger built from the same state file (a restart)
// skips re-delivered lines of that epoch at or before the saved offset,
// applies later ones, and applies every line of a new epoch.
func TestLedgerAlreadyAppliedAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	deliver := func(epoch, off int64) *core.Delivery {
		return &core.Delivery{Feed: "input", Epoch: epoch, Position: core.Position{Offset: off}}
	}
	first := newLedger(t, apps.LedgerOptions{StatePath: path})
	h := host(first)
	for i, line := range []string{"a,1", "a,2", "a,4"} {
		if _, err := handle(t, h, deliver(7, int64(10*(i+1))), line); err != nil {
			t.Fatal(err)
		}
	}
	// The "crash": the first ledger is gone; only its state file is left.
	restarted := newLedger(t, apps.LedgerOptions{StatePath: path})
	want := apps.LedgerState{Balances: map[string]int64{"a": 7}, Applied: 3, Epoch: 7, Offset: 30}
	if diff := cmp.Diff(want, restarted.State()); diff != "" {
		t.Fatalf("restored state (-want +got):\n%s", diff)
	}
	h = host(restarted)
	tests := []struct {
		name        string
		epoch, off  int64
		line        string
		wantOutputs int
		wantBalance int64
		wantOffset  int64
		wantEpoch   int64
	}{
		{"re-delivered, applied before", 7, 20, "a,2", 0, 7, 30, 7},
		{"re-delivered, the last applied", 7, 30, "a,4", 0, 7, 30, 7},
		{"next line", 7, 40, "a,8", 1, 15, 40, 7},
		{"new epoch, low offset", 8, 10, "a,16", 1, 31, 10, 8},
	}
	for _, tt := range tests {
		got, err := handle(t, h, deliver(tt.epoch, tt.off), tt.line)
		if err != nil {
			t.Fatal(err)
		}
		st := readState(t, path)
		if len(got) != tt.wantOutputs || st.Balances["a"] != tt.wantBalance || st.Offset != tt.wantOffset || st.Epoch != tt.wantEpoch {
			t.Errorf("%s: %d outputs, saved balance %d offset %d epoch %d; want %d, %d, %d, %d", tt.name, len(got),
				st.Balances["a"], st.Offset, st.Epoch, tt.wantOutputs, tt.wantBalance, tt.wantOffset, tt.wantEpoch)
		}
	}
}

// TestLedgerKeysWhatItAppliedByPositionSpaceNotByKeyAlone: deliveries
// with a position key (Kafka partitions, whose epoch is the incarnation of
// their topic: the same for every generation and restart) are saved per
// position space, epoch and key; a restarted ledger skips a re-delivered
// record at or before its space's saved offset, applies the records after
// it, applies a record of a topic created again (another epoch) at an
// offset it applied in the first one, and keeps the file rule (epoch and
// offset, key "") for a delivery without a key.
func TestLedgerKeysWhatItAppliedByPositionSpaceNotByKeyAlone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	deliver := func(epoch int64, key string, off int64) *core.Delivery {
		return &core.Delivery{Feed: "input", Epoch: epoch, Position: core.Position{Key: key, Offset: off}}
	}
	first := newLedger(t, apps.LedgerOptions{StatePath: path})
	h := host(first)
	for _, in := range []struct {
		key  string
		off  int64
		line string
	}{{"t/0", 1, "a,1"}, {"t/1", 1, "b,1"}, {"t/0", 2, "a,2"}, {"t/1", 2, "b,2"}, {"t/1", 3, "b,4"}} {
		if _, err := handle(t, h, deliver(7, in.key, in.off), in.line); err != nil {
			t.Fatal(err)
		}
	}
	restarted := newLedger(t, apps.LedgerOptions{StatePath: path})
	want := apps.LedgerState{Balances: map[string]int64{"a": 3, "b": 7}, Applied: 5, Epoch: 7, Key: "t/1", Offset: 3,
		Spaces: map[int64]map[string]int64{7: {"t/0": 2, "t/1": 3}}}
	if diff := cmp.Diff(want, restarted.State()); diff != "" {
		t.Fatalf("restored state (-want +got):\n%s", diff)
	}
	h = host(restarted)
	for _, tt := range []struct {
		name        string
		epoch       int64
		key         string
		off         int64
		line        string
		wantOutputs int
	}{
		{"t/0 applied before", 7, "t/0", 1, "a,1", 0},
		{"t/0 the last applied", 7, "t/0", 2, "a,2", 0},
		{"t/1 applied before (below t/1's offset, above t/0's)", 7, "t/1", 2, "b,2", 0},
		{"t/0 next record", 7, "t/0", 3, "a,8", 1},
		{"t/2 never seen", 7, "t/2", 1, "c,1", 1},
		{"t/0 offset 1 of the topic created again", 8, "t/0", 1, "a,16", 1},
		{"t/0 offset 1 of the topic created again, re-delivered", 8, "t/0", 1, "a,16", 0},
		{"t/1 next record of the first topic", 7, "t/1", 4, "b,8", 1},
		{"a file line (no key) of a new epoch", 9, "", 1, "d,1", 1},
	} {
		got, err := handle(t, h, deliver(tt.epoch, tt.key, tt.off), tt.line)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != tt.wantOutputs {
			t.Errorf("%s: %d outputs, want %d", tt.name, len(got), tt.wantOutputs)
		}
	}
	st := readState(t, path)
	if want := map[string]int64{"a": 27, "b": 15, "c": 1, "d": 1}; !maps.Equal(st.Balances, want) || st.Applied != 10 {
		t.Errorf("saved balances %v, applied %d; want %v, 10", st.Balances, st.Applied, want)
	}
	if want := map[int64]map[string]int64{7: {"t/0": 3, "t/1": 4, "t/2": 1}, 8: {"t/0": 1}}; !cmp.Equal(st.Spaces, want) {
		t.Errorf("saved spaces %v, want %v", st.Spaces, want)
	}
}

// TestLedgerTakesOverTheKeysOfAStateSavedBeforeSpaces: a state saved by
// an earlier version holds, per key, the offset applied whatever the
// epoch ("positions"). The ledger skips a record of that key at or before
// it, whatever its epoch, until it applies one: that record's position
// space (its epoch) takes the key's offset over, and "positions" is no
// longer saved once every key was taken over.
func TestLedgerTakesOverTheKeysOfAStateSavedBeforeSpaces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	old := `{"balances":{"a":3,"b":1},"applied":3,"epoch":4,"key":"t/1","offset":1,"positions":{"t/0":2,"t/1":1}}`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	h := host(newLedger(t, apps.LedgerOptions{StatePath: path}))
	deliver := func(epoch int64, key string, off int64) *core.Delivery {
		return &core.Delivery{Feed: "input", Epoch: epoch, Position: core.Position{Key: key, Offset: off}}
	}
	for _, tt := range []struct {
		name        string
		key         string
		off         int64
		line        string
		wantOutputs int
		wantSpaces  map[int64]map[string]int64
		wantOld     map[string]int64
	}{
		{"t/0 applied before the upgrade", "t/0", 2, "a,2", 0, nil, map[string]int64{"t/0": 2, "t/1": 1}},
		{"t/0 next record: its space takes the key over", "t/0", 3, "a,4", 1,
			map[int64]map[string]int64{9: {"t/0": 3}}, map[string]int64{"t/1": 1}},
		{"t/0 re-delivered in its space", "t/0", 3, "a,4", 0, map[int64]map[string]int64{9: {"t/0": 3}}, map[string]int64{"t/1": 1}},
		{"t/1 next record: the last key taken over", "t/1", 2, "b,2", 1, map[int64]map[string]int64{9: {"t/0": 3, "t/1": 2}}, nil},
	} {
		got, err := handle(t, h, deliver(9, tt.key, tt.off), tt.line)
		if err != nil {
			t.Fatal(err)
		}
		st := readState(t, path)
		if len(got) != tt.wantOutputs || !cmp.Equal(st.Spaces, tt.wantSpaces) || !maps.Equal(st.Positions, tt.wantOld) {
			t.Errorf("%s: %d outputs, saved spaces %v, positions %v; want %d, %v, %v", tt.name, len(got), st.Spaces, st.Positions,
				tt.wantOutputs, tt.wantSpaces, tt.wantOld)
		}
	}
}

// TestLedgerAtomicSave: every save replaces the state file by rename (a new
// file each time, never rewritten in place), leaves no temporary file, and
// a save that fails leaves the previous state file as it was.
func TestLedgerAtomicSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	l := newLedger(t, apps.LedgerOptions{StatePath: path})
	h := host(l)
	// No delivery: saved at once.
	if _, err := handle(t, h, nil, "a,1"); err != nil {
		t.Fatal(err)
	}
	fi1, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := handle(t, h, nil, "a,2"); err != nil {
		t.Fatal(err)
	}
	fi2, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(fi1, fi2) {
		t.Error("state file rewritten in place, want replaced by rename")
	}
	if got := l.StateSaves(); got != 2 {
		t.Errorf("StateSaves %d after two deliveries saved one by one, want 2", got)
	}
	snap, _ := l.Snapshot()
	if got, _ := os.ReadFile(path); string(got) != string(snap) {
		t.Errorf("state file %s, want the snapshot %s", got, snap)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d files, want only the state file", len(entries))
	}

	// A save that cannot rename (the state path is a directory) fails,
	// cleans up its temporary file, and the directory's content is intact.
	bad := filepath.Join(dir, "sub")
	if err := os.MkdirAll(filepath.Join(bad, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	lb := newLedgerAt(t, bad)
	tr := host(lb).Handle(nil, "a,1")
	if tr.Err == nil {
		t.Fatal("save over a directory succeeded")
	}
	entries, _ = os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries after a failed save, want 2 (no temporary file)", len(entries))
	}
	if _, err := os.Stat(filepath.Join(bad, "keep")); err != nil {
		t.Errorf("previous content damaged: %v", err)
	}
	if got := lb.StateSaves(); got != 0 {
		t.Errorf("StateSaves %d after a failed save, want 0", got)
	}
}

// newLedgerAt builds a ledger whose state path is an existing directory
// (which NewLedger cannot read, so it is set after construction).
func newLedgerAt(t *testing.T, path string) *apps.Ledger {
	t.Helper()
	if _, err := apps.NewLedger(apps.LedgerOptions{StatePath: path}); err == nil {
		t.Fatal("NewLedger read a directory as its state")
	}
	l := newLedger(t, apps.LedgerOptions{StatePath: filepath.Join(t.TempDir(), "x")})
	return apps.WithStatePath(l, path)
}

// TestLedgerSnapshotRestore: Snapshot and Restore round-trip the state;
// NewLedger refuses a state file that is not a state.
func TestLedgerSnapshotRestore(t *testing.T) {
	l := newLedger(t, apps.LedgerOptions{})
	h := host(l)
	for _, line := range []string{"b,2", "a,1"} {
		if _, err := handle(t, h, &core.Delivery{Epoch: 1, Position: core.Position{Offset: 5}}, line); err != nil {
			t.Fatal(err)
		}
	}
	snap, err := l.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The second line was skipped: same epoch, offset 5 already applied.
	if want := `{"balances":{"b":2},"applied":1,"epoch":1,"offset":5}`; string(snap) != want {
		t.Errorf("Snapshot = %s, want %s", snap, want)
	}
	r := newLedger(t, apps.LedgerOptions{})
	if err := r.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(l.State(), r.State()); diff != "" {
		t.Errorf("restored (-want +got):\n%s", diff)
	}
	if err := r.Restore([]byte("nope")); err == nil {
		t.Error("Restore of garbage succeeded")
	}
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := apps.NewLedger(apps.LedgerOptions{StatePath: path}); err == nil {
		t.Error("NewLedger accepted a broken state file")
	}
}

func TestAlerts(t *testing.T) {
	tests := []struct {
		name      string
		threshold int64
		line      any
		want      []any
	}{
		{"above", 0, "alice,1500", []any{alert("alice", 1500, at(0))}},
		{"at threshold", 0, "alice,1000", []any{alert("alice", 1000, at(0))}},
		{"negative", 0, "bob,-1000", []any{alert("bob", -1000, at(0))}},
		{"below", 0, "alice,999", nil},
		{"negative below", 0, "alice,-999", nil},
		{"custom threshold", 10, " carol , 10 ", []any{alert("carol", 10, at(0))}},
		{"min int64", 10, "x,-9223372036854775808", []any{alert("x", -9223372036854775808, at(0))}},
		{"transfer ignored", 0, "transfer,a,b,5000", nil},
		{"tick ignored", 0, "tick", nil},
		{"malformed ignored", 0, "alice,lots", nil},
		{"empty account ignored", 0, ",5000", nil},
		{"not a line", 0, 5000, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := apps.NewAlerts(apps.AlertsOptions{Threshold: tt.threshold})
			if err != nil {
				t.Fatal(err)
			}
			tr := host(a).Handle(nil, tt.line)
			if tr.Err != nil {
				t.Fatal(tr.Err)
			}
			if diff := cmp.Diff(tt.want, outputs(t, tr)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if _, err := apps.NewAlerts(apps.AlertsOptions{Threshold: -1}); err == nil {
		t.Error("negative threshold accepted")
	}
}

func TestTheBuiltInApps(t *testing.T) {
	var names []string
	for _, a := range apps.All() {
		names = append(names, a.Name)
		p, err := a.Build(nil)
		if err != nil || p == nil {
			t.Errorf("%s.Build(nil) = %v, %v", a.Name, p, err)
		}
	}
	if diff := cmp.Diff([]string{"alerts", "ledger"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if _, ok := mustNew(t, "ledger").(core.Snapshotter); !ok {
		t.Error("ledger is not a Snapshotter")
	}
	if _, ok := mustNew(t, "ledger").(core.TimerHandler); !ok {
		t.Error("ledger is not a TimerHandler")
	}
	if _, ok := mustNew(t, "ledger").(core.Durable); !ok {
		t.Error("ledger is not Durable")
	}
}

// Each app takes its own options and refuses any other, or a value it
// cannot use, with core.ErrOption.
func TestAppOptions(t *testing.T) {
	for _, tc := range []struct {
		app     core.App
		options map[string]string
		wantErr bool
	}{
		{apps.AlertsApp(), map[string]string{"threshold": "7"}, false},
		{apps.AlertsApp(), map[string]string{"threshold": "-1"}, true},
		{apps.AlertsApp(), map[string]string{"threshold": "x"}, true},
		{apps.AlertsApp(), map[string]string{"state": "s.json"}, true},
		{apps.LedgerApp(), map[string]string{"state": filepath.Join(t.TempDir(), "s.json")}, false},
		{apps.LedgerApp(), map[string]string{"threshold": "7"}, true},
	} {
		p, err := tc.app.Build(tc.options)
		if got := err != nil; got != tc.wantErr || (err != nil && !errors.Is(err, core.ErrOption)) {
			t.Errorf("%s.Build(%v) = %v, %v; want an error wrapping ErrOption: %v", tc.app.Name, tc.options, p, err, tc.wantErr)
		}
	}
	p, err := apps.AlertsApp().Build(map[string]string{"threshold": "7"})
	if err != nil {
		t.Fatal(err)
	}
	var got []any
	c := core.NewHost("alerts", p, core.NewStepClock(time.Unix(0, 0), time.Second), core.WithSink(core.SinkFunc(func(_, _ string, out any) error {
		got = append(got, out)
		return nil
	})))
	for _, line := range []string{"a,6", "a,7"} {
		if tr := c.Handle(nil, line); tr.Err != nil {
			t.Fatal(tr.Err)
		}
	}
	if len(got) != 1 {
		t.Fatalf("threshold 7: alerts %v, want one (for 7, not 6)", got)
	}
}

func mustNew(t *testing.T, name string) core.Processor {
	t.Helper()
	a, ok := core.FindApp(apps.All(), name)
	if !ok {
		t.Fatalf("no built-in app %q", name)
	}
	p, err := a.Build(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecode(t *testing.T) {
	tests := []struct {
		payload string
		want    any
		wantErr bool
	}{
		{`"alice,100"`, "alice,100", false},
		{`"a\u0026b \"q\""`, `a&b "q"`, false},
		{`""`, "", false},
		{`5`, nil, true},
		{`{"a":1}`, nil, true},
		{`"unterminated`, nil, true},
	}
	for _, tt := range tests {
		got, err := apps.Decode([]byte(tt.payload))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("Decode(%s) = %v, %v; want %v, error %v", tt.payload, got, err, tt.want, tt.wantErr)
		}
	}
}

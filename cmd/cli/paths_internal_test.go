package cli

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/store"
)

// TestCheckReplaceable: what --store may write over: nothing or an empty
// file; a recording only with --force (store.ErrHoldsRecording without);
// never a file that is not a recording (store.ErrFormat), even with
// --force.
func TestCheckReplaceable(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("alice,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := New(WithStdout(io.Discard), WithStderr(io.Discard)).Execute(context.Background(), []string{"run", "--app", "ledger",
		"--input", in, "--store", filepath.Join(dir, "rec.csv"), "--read", "once-earliest"}); code != 0 {
		t.Fatalf("run: exit %d", code)
	}
	files := map[string][]byte{"text.txt": []byte("alice,1\n"), "empty.db": nil,
		"fake.db": []byte("SQLite format 3\x00 truncated")}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		force       bool
		wantReplace bool
		wantErr     error
	}{
		{"missing.db", false, false, nil},
		{"empty.db", false, false, nil},
		{"rec.csv", false, false, store.ErrHoldsRecording},
		{"rec.csv", true, true, nil},
		{"text.txt", false, false, store.ErrFormat},
		{"text.txt", true, false, store.ErrFormat},
		{"fake.db", true, false, store.ErrFormat},
		{".rec.csv" + tempInfix, true, false, nil}, // missing: a new file
	} {
		got, err := checkReplaceable(filepath.Join(dir, tc.name), tc.force)
		if got != tc.wantReplace || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
			t.Errorf("%s force %v: replace %v, err %v; want %v, %v", tc.name, tc.force, got, err, tc.wantReplace, tc.wantErr)
		}
	}
}

// TestLockIsExclusiveAndReleased: a second lock of an output fails at once
// (errLocked) while the first is held, through another name of the file
// too; released, the lock file is gone and the output can be locked again.
func TestLockIsExclusiveAndReleased(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state.json")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	a := pathArg{flag: "--state", path: state, write: true}
	release, err := lockOutputs([]pathArg{a})
	if err != nil {
		t.Fatal(err)
	}
	other := pathArg{flag: "--state", path: filepath.Join(dir, "sub", "..", "state.json"), write: true}
	if _, err := lockOutputs([]pathArg{other}); !errors.Is(err, errLocked) {
		t.Errorf("second lock: %v, want errLocked", err)
	}
	release()
	if _, err := os.Stat(state + lockSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock file after release: %v", err)
	}
	release, err = lockOutputs([]pathArg{other})
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	release()
}

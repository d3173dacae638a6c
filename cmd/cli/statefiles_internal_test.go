package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/blackbox-audit/blackbox/engine"
)

// TestCheckStateLayout: the layout of the existing state files against a
// run's: no state file, any layout (the record written for workers, a
// stale one removed for one worker); FILE alone, 1 worker; FILE#wK, the
// record's; another count or order, files that do not match their record,
// or a record that is not one: errStateLayout, naming the file.
func TestCheckStateLayout(t *testing.T) {
	four, fourNone, one := runLayout(4, engine.OrderKey), runLayout(4, engine.OrderNone), runLayout(1, engine.OrderNone)
	const rec4 = `{"workers":4,"order":"key"}`
	for _, tc := range []struct {
		name    string
		files   map[string]string // beside the state s.json
		want    stateLayout
		action  layoutAction
		errFile string // the file a refusal names ("": none)
	}{
		{"fresh on 4", nil, four, layoutWrite, ""},
		{"fresh on 1", nil, one, layoutKeep, ""},
		{"fresh on 4, its record", map[string]string{"s.json#workers": rec4}, four, layoutKeep, ""},
		{"fresh on 4, a stale record", map[string]string{"s.json#workers": `{"workers":8,"order":"key"}`}, four, layoutWrite, ""},
		{"fresh on 1, a stale record", map[string]string{"s.json#workers": rec4}, one, layoutRemove, ""},
		{"1 then 1", map[string]string{"s.json": "{}"}, one, layoutKeep, ""},
		{"1 then 4", map[string]string{"s.json": "{}"}, four, layoutKeep, "s.json"},
		{"4 then 4", map[string]string{"s.json#w0": "{}", "s.json#w3": "{}", "s.json#workers": rec4}, four, layoutKeep, ""},
		{"4 then 8", map[string]string{"s.json#w0": "{}", "s.json#workers": rec4}, runLayout(8, engine.OrderKey), layoutKeep, "s.json#workers"},
		{"4 then 1", map[string]string{"s.json#w1": "{}", "s.json#workers": rec4}, one, layoutKeep, "s.json#workers"},
		{"4 key then 4 none", map[string]string{"s.json#w1": "{}", "s.json#workers": rec4}, fourNone, layoutKeep, "s.json#workers"},
		{"a worker beyond", map[string]string{"s.json#w1": "{}", "s.json#w4": "{}", "s.json#workers": rec4}, four, layoutKeep, "s.json#w4"},
		{"FILE beside a record", map[string]string{"s.json": "{}", "s.json#w1": "{}", "s.json#workers": rec4}, four, layoutKeep, "s.json"},
		{"no record", map[string]string{"s.json#w2": "{}", "s.json#w3": "{}"}, four, layoutKeep, "s.json#w2"},
		{"not a record", map[string]string{"s.json#w2": "{}", "s.json#workers": `{"workers":1}`}, four, layoutKeep, "s.json#workers"},
		{"not a worker's name", map[string]string{"s.json#w01": "{}", "s.json#wx": "{}", "s.json#w1.blackbox-lock": ""}, four, layoutWrite, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			state := filepath.Join(dir, "s.json")
			action, err := checkStateLayout(state, tc.want)
			var fe *fileError
			switch {
			case tc.errFile == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.errFile != "" && !errors.Is(err, errStateLayout):
				t.Fatalf("err %v, want errStateLayout", err)
			case tc.errFile != "" && (!errors.As(err, &fe) || fe.path != filepath.Join(dir, tc.errFile)):
				t.Errorf("err %v, want it to name %s", err, tc.errFile)
			}
			if err == nil && action != tc.action {
				t.Errorf("action %d, want %d", action, tc.action)
			}
		})
	}
}

// TestStateNamesAreTheStates: a path is one of the state's files by its
// name (FILE#w<K>, FILE#workers) through another spelling of its
// directory, or a symbolic link to one; anything else is not.
func TestStateNamesAreTheStates(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "s.json#w3"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "s.json#w3"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "s.json")
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"s.json#w0", true},
		{"sub/../s.json#w12", true},
		{"s.json#workers", true},
		{"link", true},
		{"s.json", false}, // --state itself: the identity check compares it
		{"s.json#w01", false},
		{"s.json#wx", false},
		{"s.json.ptr", false},
		{"t.json#w0", false},
		{"sub/s.json#w0", false},
	} {
		if got := isStateName(filepath.Join(dir, tc.path), state); got != tc.want {
			t.Errorf("isStateName(%s) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

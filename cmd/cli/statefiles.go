package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
)

// This file holds what `run` knows of the files of an app's durable state
// (--state FILE). On one worker the app keeps its state in FILE. On N > 1
// workers each worker keeps its own: worker K's in FILE#wK
// (core.WorkerStream), holding the state of the keys engine.WorkerOf gives
// it and the position of the last line it applied, by which it skips the
// lines a restart delivers again. That is right only for a restart on the
// same workers, key-ordered: on another count a key's lines reach a worker
// whose state does not hold them (applied again, or skipped as applied
// and never applied); with --order none a line delivered again may reach
// another worker than the one that applied it. So:
//
//   - --state with --workers above 1 needs --order key (errStateOrder);
//   - a run on N > 1 workers records the layout of its state files (N and
//     the order) in FILE#workers before any work (stateLayout);
//   - before any work, every run compares the layout of the existing state
//     with its own (checkStateLayout: FILE alone is a 1-worker state,
//     FILE#wK are read with FILE#workers) and refuses another one, or
//     files that do not match their record (errStateLayout);
//   - every one of those files is checked and locked as the run's other
//     outputs are (stateFiles), and no other flag may name one
//     (checkStateNames).

// errStateLayout: the existing state files were written by a run on other
// workers (another count or order), or do not match the record of them.
var errStateLayout = errors.New("cli: state of other workers")

// errStateOrder: state kept per worker needs key-ordered workers.
var errStateOrder = errors.New("cli: per-worker state needs --order key")

// stateLayoutSuffix names the record of a state's layout: FILE#workers.
const stateLayoutSuffix = "#workers"

// stateLayout is how the state files of a run are laid out: the workers
// that write them and how lines reach them (Order: "" on one worker, where
// it means nothing). The JSON of FILE#workers. A plain value.
type stateLayout struct {
	Workers int          `json:"workers"`
	Order   engine.Order `json:"order,omitempty"`
}

// runLayout is the layout of a run on workers with order (resolved: key
// or none).
func runLayout(workers int, order engine.Order) stateLayout {
	if workers <= 1 {
		return stateLayout{Workers: 1}
	}
	return stateLayout{Workers: workers, Order: order}
}

func (l stateLayout) String() string {
	if l.Workers <= 1 {
		return "1 worker"
	}
	return fmt.Sprintf("%d workers (--order %s)", l.Workers, l.Order)
}

// flags are the flags of a run with this layout.
func (l stateLayout) flags() string {
	if l.Workers <= 1 {
		return "--workers 1"
	}
	return fmt.Sprintf("--workers %d --order %s", l.Workers, l.Order)
}

// layoutPath is the record of state's layout.
func layoutPath(state string) string { return state + stateLayoutSuffix }

// existingWorkerStates lists the workers K whose state file FILE#wK
// exists beside state, in order.
func existingWorkerStates(state string) ([]int, error) {
	dir, base := filepath.Dir(state), filepath.Base(state)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &fileError{state, fmt.Errorf("--state: listing %s: %w", dir, unwrapPathError(err))}
	}
	var ks []int
	for _, e := range ents {
		if p, k, ok := core.ParseWorkerStream(e.Name()); ok && p == base {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks, nil
}

// stateFiles lists the files of a run's state, to be checked and locked
// with its other outputs: FILE, its layout record FILE#workers, FILE#wK
// for each of the run's workers (on more than one), and every FILE#wK
// that exists (the layout check reads them). A listing that fails leaves
// the existing ones out: checkStateLayout reports it.
func stateFiles(state string, workers int) []string {
	if state == "" {
		return nil
	}
	files := []string{state, layoutPath(state)}
	ks := map[int]bool{}
	if workers > 1 {
		for w := range workers {
			ks[w] = true
		}
	}
	existing, _ := existingWorkerStates(state)
	for _, k := range existing {
		ks[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(ks)) {
		files = append(files, core.WorkerStream(state, k))
	}
	return files
}

// stateFamily is where the state files of state live: state's directory
// (its symbolic links resolved) joined with its name. FILE#wK and
// FILE#workers are named after the path the user gave, beside it.
func stateFamily(state string) string {
	return filepath.Join(canonical(filepath.Dir(state)), filepath.Base(state))
}

// isStateName reports whether path is one of state's files by its name:
// FILE#w<K> or FILE#workers, found through path's own name or, when it is
// a symbolic link, the file it names.
func isStateName(path, state string) bool {
	fam := stateFamily(state)
	for _, p := range []string{stateFamily(path), canonical(path)} {
		if p == layoutPath(fam) {
			return true
		}
		if base, _, ok := core.ParseWorkerStream(p); ok && base == fam {
			return true
		}
	}
	return false
}

// checkStateNames refuses a path of args, other than --state's, that is
// one of the state's files by name (isStateName), whatever the count of
// workers: a run on another count would take it for a worker's state, or
// write over it.
func checkStateNames(args []pathArg, state string) error {
	if state == "" {
		return nil
	}
	for _, a := range args {
		if a.path == "" || a.flag == "--state" || !isStateName(a.path, state) {
			continue
		}
		return usagef("%s %s is a name of --state %s's files (%s#w<K>: a worker's state; %s%s: their layout)",
			a.flag, a.path, state, state, state, stateLayoutSuffix)
	}
	return nil
}

// layoutAction is what a run does with the layout record of its state,
// once every check passed: nothing, write it, or remove a stale one.
type layoutAction int

const (
	layoutKeep layoutAction = iota
	layoutWrite
	layoutRemove
)

// checkStateLayout compares the layout of the existing state files of
// state with want's, before any work (the files locked), and says what to
// do with the record. With no state file (no FILE, no FILE#wK: nothing was
// applied, or nothing committed) any layout goes. Otherwise the existing
// layout is FILE#workers's, or, with no record, 1 worker when FILE alone
// exists; a different one is refused, and so are files that do not match
// their record (FILE beside a record, a FILE#wK beyond it, FILE#wK with no
// record). A refusal is an error wrapping errStateLayout naming the file
// and both layouts.
func checkStateLayout(state string, want stateLayout) (layoutAction, error) {
	if state == "" {
		return layoutKeep, nil
	}
	rec := layoutPath(state)
	have, haveRec, err := readLayout(rec)
	if err != nil {
		return layoutKeep, err
	}
	_, err = os.Stat(state)
	single := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return layoutKeep, &fileError{state, fmt.Errorf("--state: %w", unwrapPathError(err))}
	}
	ks, err := existingWorkerStates(state)
	if err != nil {
		return layoutKeep, err
	}
	refuse := func(path, format string, args ...any) error {
		return &fileError{path, fmt.Errorf("--state: %w: %s", errStateLayout, fmt.Sprintf(format, args...))}
	}
	switch {
	case !single && len(ks) == 0: // no state yet: this run's layout
		switch {
		case want.Workers > 1 && (!haveRec || have != want):
			return layoutWrite, nil
		case want.Workers <= 1 && haveRec:
			return layoutRemove, nil
		}
		return layoutKeep, nil
	case haveRec && single:
		return layoutKeep, refuse(state, "the state of a run on 1 worker, beside %s, the record of a state on %s: which lines each applied cannot be told",
			rec, have)
	case haveRec && ks[len(ks)-1] >= have.Workers:
		k := ks[len(ks)-1]
		return layoutKeep, refuse(core.WorkerStream(state, k), "the state of worker %d, beyond the %s that %s records: which lines it applied cannot be told",
			k, have, rec)
	case !haveRec && len(ks) > 0:
		return layoutKeep, refuse(core.WorkerStream(state, ks[0]), "the state of worker %d, but %s, the record of how many workers wrote it and in what order, is missing: which lines each applied cannot be told; start from a new --state, or write that record ({\"workers\":N,\"order\":\"key\"}) with the workers that wrote it",
			ks[0], rec)
	case !haveRec:
		have = stateLayout{Workers: 1}
	}
	if have == want {
		return layoutKeep, nil
	}
	path := rec
	if !haveRec {
		path = state
	}
	return layoutKeep, refuse(path, "written on %s, and this run is on %s: a worker's state holds the keys it was given and the last line it applied, so on other workers a key's lines would reach a worker whose state does not hold them (applied again, or skipped and never applied); run with %s, or start from a new --state",
		have, want, have.flags())
}

// readLayout reads the layout record at path; ok is false when there is
// none. One that cannot be read or is not a layout is an error wrapping
// errStateLayout.
func readLayout(path string) (l stateLayout, ok bool, err error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return l, false, nil
	case err != nil:
		return l, false, &fileError{path, fmt.Errorf("--state: %w: %w", errStateLayout, unwrapPathError(err))}
	}
	if err := json.Unmarshal(b, &l); err != nil || l.Workers < 2 || l.Order != engine.OrderKey && l.Order != engine.OrderNone {
		return l, false, &fileError{path, fmt.Errorf("--state: %w: not a record of the workers of a state (want {\"workers\":N,\"order\":\"key\"}, N at least 2)", errStateLayout)}
	}
	return l, true, nil
}

// applyLayout does what checkStateLayout said with the record of state's
// layout. It reports whether it created the record (for the run to
// remove it if it fails before any work).
func applyLayout(state string, action layoutAction, l stateLayout) (created bool, err error) {
	rec := layoutPath(state)
	switch action {
	case layoutWrite:
		_, statErr := os.Stat(rec)
		if err := writeFileAtomic(rec, func(w io.Writer) error { return WriteJSON(w, l) }); err != nil {
			return false, err
		}
		return errors.Is(statErr, fs.ErrNotExist), nil
	case layoutRemove:
		if err := os.Remove(rec); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, &fileError{rec, unwrapPathError(err)}
		}
	}
	return false, nil
}

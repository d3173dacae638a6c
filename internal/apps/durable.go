package apps

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"strconv"
	"time"

	"github.com/blackbox-audit/blackbox/core"
)

// FileError is a problem with a named file: its text is "PATH: reason".
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FileError) Unwrap() error { return e.Err }

// fileErr names path once: an *fs.PathError's text repeats it.
func fileErr(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &FileError{path, err}
}

// HasDurableState reports whether app keeps durable state a crash test can
// check: it takes the option state (OptionState) and its processor
// implements core.Durable. probe is a state file an app given it only
// reads on construction (not created). An app refusing the option
// (core.ErrOption) has none; any other error is the app's.
func HasDurableState(app core.App, probe string) (bool, error) {
	p, err := app.Build(map[string]string{OptionState: probe})
	if errors.Is(err, core.ErrOption) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, ok := p.(core.Durable)
	return ok, nil
}

// DurableStateOf builds app over the state file path (as a restarted run
// would) and returns what the state holds. Errors are *FileError naming
// path.
func DurableStateOf(app core.App, path string) (core.DurableState, error) {
	p, err := app.Build(map[string]string{OptionState: path})
	if err != nil {
		return core.DurableState{}, &FileError{path, err}
	}
	d, ok := p.(core.Durable)
	if !ok {
		return core.DurableState{}, &FileError{path, errors.New("the app's processor does not implement core.Durable")}
	}
	return d.DurableState(), nil
}

// StateBatchOptions are the app options of a state saved in batches
// (OptionStateEvery, OptionStateInterval): those set (above 0).
func StateBatchOptions(every int, interval time.Duration) map[string]string {
	opts := map[string]string{}
	if every > 0 {
		opts[OptionStateEvery] = strconv.Itoa(every)
	}
	if interval > 0 {
		opts[OptionStateInterval] = interval.String()
	}
	return opts
}

// WriteLedgerLines writes n deterministic ledger lines to path (seeded by
// seed): account,amount postings over 50 accounts, with transfers a
// transfer every 40 lines or so, with ticks a tick every 5,000 lines (a
// crash test has none: a timer's output is not re-emitted after a crash),
// no fail line. It returns the number of postings the ledger applies for
// them (a transfer is two). Errors are *FileError naming path; a file
// not written whole is removed.
func WriteLedgerLines(path string, n int, seed uint64, ticks, transfers bool) (postings int64, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fileErr(path, err)
	}
	w := bufio.NewWriterSize(f, 64<<10)
	rng := rand.New(rand.NewPCG(seed, 0x626c61636b626f78)) // "blackbox"
	account := func() string { return fmt.Sprintf("acct-%02d", rng.IntN(50)) }
	for i := 1; i <= n; i++ {
		switch {
		case ticks && i%5000 == 2500:
			fmt.Fprintln(w, "tick")
		case transfers && rng.IntN(40) == 0:
			fmt.Fprintf(w, "transfer,%s,%s,%d\n", account(), account(), 1+rng.IntN(500))
			postings += 2
		default:
			fmt.Fprintf(w, "%s,%d\n", account(), rng.IntN(2001)-500)
			postings++
		}
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return 0, fileErr(path, err)
	}
	return postings, nil
}

//go:build unix

package filesource

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// While a source follows a file, the path comes to name a FIFO (open(2)
// of a FIFO for reading blocks until a writer comes) or a symlink to
// /dev/zero (endless bytes, no line end): neither is opened for reading.
// The old file is read on, the refusal is warned, and Stop is honoured at
// once.
func TestASpecialFileAtThePathIsNotReadAndStopIsHonoured(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace func(t *testing.T, path string)
	}{
		{"fifo", func(t *testing.T, path string) {
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Skip("no FIFOs here:", err)
			}
		}},
		{"symlink-to-dev-zero", func(t *testing.T, path string) {
			if _, err := os.Stat("/dev/zero"); err != nil {
				t.Skip("no /dev/zero")
			}
			if err := os.Symlink("/dev/zero", path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for _, strategy := range []Strategy{Committed, Earliest} {
			t.Run(tc.name+"/"+strategy.String(), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					path := input(t, numbered("old", 0, 3))
					src, lg := newSource(t, path, Options{Read: strategy})
					p := &rec{}
					r := startSource(t, src, lg, setup{procs: []*rec{p}})
					r.settle(3, p)
					old, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0) // the writer keeps the old file
					if err != nil {
						t.Fatal(err)
					}
					defer old.Close()
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
					tc.replace(t, path)
					testutil.AdvanceUntil(t, "the refusal", func() bool { return lg.Has("not a regular file") })
					if _, err := old.WriteString(numbered("old", 3, 5)); err != nil {
						t.Fatal(err)
					}
					r.settle(5, p)
					if n := strings.Count(lg.String(), "not a regular file"); n != 1 {
						t.Fatalf("the refusal warned %d times, want once:\n%s", n, lg)
					}
					if st := r.feed(); st.Detail == nil || !strings.Contains(*st.Detail, "not a regular file") {
						t.Fatalf("detail %v: want the refusal", st.Detail)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a bound, not a wait
					defer cancel()
					if err := r.e.Stop(ctx); err != nil {
						t.Fatal(err)
					}
					if got, _ := p.got(); !slices.Equal(got, linesOf("old", 0, 5)) {
						t.Fatalf("got %q", got)
					}
				})
			})
		}
	}
}

// At the start, a path naming a FIFO is refused at once (ErrNotRegular),
// never opened for a blocking read.
func TestAFIFOAtTheStartIsRefusedAtOnce(t *testing.T) {
	path := input(t, "")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	for _, strategy := range []Strategy{Committed, Earliest, OnceEarliest} {
		t.Run(strategy.String(), func(t *testing.T) {
			src, _ := newSource(t, path, Options{Read: strategy, Pointer: path + "." + strategy.String() + ".ptr"})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a bound, never reached by a refusal
			defer cancel()
			err := src.Run(ctx, intakeFor(t, src, 16, nil))
			if !errors.Is(err, ErrNotRegular) {
				t.Fatalf("Run on a FIFO: %v, want ErrNotRegular", err)
			}
		})
	}
}

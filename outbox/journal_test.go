package outbox_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/outbox"
	"github.com/blackbox-audit/blackbox/store"
)

// gatedJournal is a feed journal the engine calls under the feed's lock
// before the recorder's: for item 2 it waits until the recorder is
// writing item 1's rows, then tells it goes on (to the recorder's
// journal, which waits for the recorder's lock).
type gatedJournal struct {
	writing <-chan struct{}
	goes    chan<- struct{}
}

func (j gatedJournal) Append(_ context.Context, _ string, seq int64, _ any) error {
	if seq == 2 {
		<-j.writing
		close(j.goes)
	}
	return nil
}

// gatedStore holds the recorder's first Append of processor rows (under
// the recorder's lock) until the feed's publisher holds the feed's lock.
type gatedStore struct {
	store.Writer
	writing chan<- struct{}
	goes    <-chan struct{}
	held    bool
}

func (s *gatedStore) Append(rows ...store.Entry) error {
	if !s.held && holdsInput(rows) {
		s.held = true
		close(s.writing)
		<-s.goes
	}
	return s.Writer.Append(rows...)
}

func holdsInput(rows []store.Entry) bool {
	for _, e := range rows {
		if e.Kind == store.KindIndexed || e.Kind == store.KindInline {
			return true
		}
	}
	return false
}

// The outbox learns whether a feed's source commits while the recorder
// tells it the rows it wrote, under the recorder's lock; a journalled
// feed's publisher holds the feed's lock while it waits for the
// recorder's. Asking the feed must not take the feed's lock then: the run
// would stop for good (it did: Written called engine.Feed.Commits).
func TestAJournalledRunWithAnOutboxDoesNotDeadlock(t *testing.T) {
	b := newBench(t)
	_, box := b.mustOpenFile(outbox.FormatValue)
	writing, goes := make(chan struct{}), make(chan struct{})
	tp := newTape(ints(1, 5)...)
	tp.setClosed(true)
	l := b.start(box, runConfig{
		Source:  tp.source(),
		Journal: true,
		Feed:    func(fc *engine.FeedConfig) { fc.Journal = gatedJournal{writing: writing, goes: goes} },
		Store:   func(w store.Writer) store.Writer { return &gatedStore{Writer: w, writing: writing, goes: goes} },
	})
	// A deadlocked run blocks even its status (the feed's lock): wait on
	// another goroutine, and fail after a while.
	settled := make(chan error, 1)
	go func() {
		_, err := l.run.Engine().WaitSettled(context.Background())
		settled <- err
	}()
	select {
	case err := <-settled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not settle within 20s: the publisher and the recorder wait for each other")
	}
	if _, err := l.stop(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(outputs(1, 5), lines(t, b.out)); diff != "" {
		t.Fatalf("out file (-want +got):\n%s", diff)
	}
}

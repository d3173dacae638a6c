package kafkasource_test

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// TestALostSessionCommitsNothing: the consumer processes every record of
// the one partition (it waits at offset 49 until the records before it are
// committed) while the broker refuses its commits past offset 49,
// so at the end 151 records are processed and acknowledged, not
// committed. Then the coordinator answers a heartbeat with
// ILLEGAL_GENERATION: the client declares the session lost
// (OnPartitionsLost) and the source stops owning the partition without
// committing: no commit of the lost generation reaches the broker after
// that answer (the partition may be another member's already), though
// commits are accepted again from then on. The client rejoins under a new
// generation, reads again from the committed offset 49 and commits every
// record to the end: the 151 records are processed twice, none lost.
//
// Over 100 lines: one scenario in order (commits refused, the session
// lost, the rejoin) whose checks read the commit requests the broker saw
// at every step; split, a step would be read apart from them.
func TestALostSessionCommitsNothing(t *testing.T) {
	const n, refuseFrom = 200, 49
	c := newShortSessionCluster(t, 1)
	hwm := produce(t, c, n, 10)

	type commit struct {
		generation int32
		offset     int64
	}
	var (
		mu       sync.Mutex
		commits  []commit // every commit request, refused or not
		refusing = true   // refuse commits past refuseFrom
		lose     bool     // answer the next heartbeat with ILLEGAL_GENERATION
		lostGen  int32
		lostAt   = -1 // len(commits) when that heartbeat was answered
	)
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		mu.Lock()
		defer mu.Unlock()
		past := false
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				commits = append(commits, commit{r.Generation, rp.Offset})
				past = past || rp.Offset > refuseFrom
			}
		}
		if refusing && past {
			return failCommit(r), nil, true
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		if !lose {
			return nil, nil, false
		}
		lose, refusing = false, false
		r := req.(*kmsg.HeartbeatRequest)
		lostGen, lostAt = r.Generation, len(commits)
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.IllegalGeneration.Code
		return resp, nil, true
	})

	// A long poll interval: the refused commit is retried once a second,
	// so none is in flight when the session is lost.
	src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "glost",
		PollInterval: time.Second, Logger: slog.New(slog.DiscardHandler),
		ClientOptions: []kgo.Opt{kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(50 * time.Millisecond)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close() })
	tl := newTally(hwm)
	gate := make(chan struct{})
	startEngine(t, src, core.ProcessorFunc(func(_ *core.Cycle, ev any) error {
		r := ev.(*kafkasource.Record)
		if r.Offset == refuseFrom && tl.parts[0][r.Offset].Load() == 0 {
			<-gate // until the records before it are committed
		}
		tl.add(r)
		return nil
	}))
	testutil.PollUntil(t, time.Minute, "the records before 49 committed", func() bool { return committedAt(src) == refuseFrom })
	close(gate)
	testutil.PollUntil(t, time.Minute, "every record processed, the commits past 49 refused", func() bool {
		st := src.Status()
		return len(st.Partitions) == 1 && st.Partitions[0].Processed == n && st.Partitions[0].Committed == refuseFrom && st.CommitFailures > 0
	})
	mu.Lock()
	lose = true
	mu.Unlock()
	testutil.PollUntil(t, time.Minute, "the session lost, the partition assigned again and committed to its end", func() bool {
		mu.Lock()
		gen := lostGen
		mu.Unlock()
		return src.Status().Generation > int64(gen) && allCommitted(src, hwm)
	})

	mu.Lock()
	defer mu.Unlock()
	if lostAt < 0 {
		t.Fatal("no heartbeat was answered with ILLEGAL_GENERATION")
	}
	for _, cm := range commits[lostAt:] {
		if cm.generation <= lostGen {
			t.Errorf("commit of offset %d under generation %d after the session of generation %d was lost", cm.offset, cm.generation, lostGen)
		}
	}
	for o := range tl.parts[0] {
		want := int32(1)
		if o >= refuseFrom {
			want = 2 // processed by the lost generation, not committed: read again
		}
		if got := tl.parts[0][o].Load(); got != want {
			t.Errorf("offset %d processed %d times, want %d", o, got, want)
		}
	}
	t.Logf("lost generation %d, rejoined as %d; commits after the loss %v", lostGen, src.Status().Generation, commits[lostAt:])
}

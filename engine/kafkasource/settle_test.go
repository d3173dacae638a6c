package kafkasource_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/engine/kafkasource"
	"github.com/blackbox-audit/blackbox/internal/testutil"
)

// TestTheLastMemberJudgesThePartitionsOfAMemberThatLeftByTheGroupsCommit:
// two draining members (run --kafka without --follow) of one group read a
// two-partition topic, one partition each, and settle. Member A stops and
// leaves the group; B's JoinGroup is held, so the group stays
// rebalancing and A's partition is assigned to no member when B stops
// (as in a fleet whose last member ends while the group rebalances the
// partitions of those that left). A partition no member is assigned is
// judged by the group's commit: at its end (A committed it), B ends
// settled, CAUGHT_UP; with records produced to it after A left (below
// the end), B ends BEHIND, naming the partition and the records not
// committed, not settled.
func TestTheLastMemberJudgesThePartitionsOfAMemberThatLeftByTheGroupsCommit(t *testing.T) {
	for _, tc := range []struct {
		name        string
		after       int // records produced to A's partition once A left
		wantSettled bool
		wantDetail  string // in B's feed detail, %d A's partition
	}{
		{name: "committed to its end", wantSettled: true},
		{name: "records left", after: 10, wantDetail: "partitions not assigned to any member of group gsettle, not committed to their end: " + topic + "/%d (10 records not committed)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 2)
			hwm := produce(t, c, 40, 8)
			member := func() (*kafkasource.Source, *engine.Engine) {
				src, err := kafkasource.New(kafkasource.Options{Brokers: c.ListenAddrs(), Topics: []string{topic}, Group: "gsettle", Drain: true,
					PollInterval: 10 * time.Millisecond, RevokeTimeout: 200 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { src.Close() })
				return src, startEngine(t, src, core.ProcessorFunc(func(*core.Cycle, any) error { return nil }))
			}
			srcA, engA := member()
			srcB, engB := member()
			ownsOne := func(src *kafkasource.Source) int32 {
				var owned []int32
				for _, p := range src.Status().Partitions {
					if p.Owned {
						owned = append(owned, p.Partition)
					}
				}
				if len(owned) != 1 {
					return -1
				}
				return owned[0]
			}
			var pa int32
			testutil.PollUntil(t, time.Minute, "one partition each, both settled", func() bool {
				pa = ownsOne(srcA)
				return pa >= 0 && ownsOne(srcB) >= 0 && engA.Status().Settled && engB.Status().Settled
			})

			// Hold B's JoinGroup until B has stopped: the group rebalances
			// without end, and describes no member's assignment meanwhile.
			release := make(chan struct{})
			var released bool
			unhold := func() {
				if !released {
					released = true
					close(release)
				}
			}
			t.Cleanup(unhold) // before the sources' Close (cleanups run last first)
			c.ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.SleepControl(func() { <-release })
				return nil, nil, false
			})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := engA.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			srcA.Close() // leaves the group
			adm, done := admin(t, c)
			defer done()
			testutil.PollUntil(t, time.Minute, "the group rebalancing with B alone", func() bool {
				gs, err := adm.DescribeGroups(ctx, "gsettle")
				if err != nil {
					return false
				}
				g := gs["gsettle"]
				return g.State == "PreparingRebalance" && len(g.Members) == 1
			})
			if tc.after > 0 {
				produceTo(t, c, pa, tc.after)
			}
			if err := engB.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			unhold()

			st := engB.Status()
			fs := st.Feeds[0]
			detail := ""
			if fs.Detail != nil {
				detail = *fs.Detail
			}
			wantState := engine.StateCaughtUp
			if !tc.wantSettled {
				wantState = engine.StateBehind
			}
			want := ""
			if tc.wantDetail != "" {
				want = fmt.Sprintf(tc.wantDetail, pa)
			}
			if st.Settled != tc.wantSettled || fs.State != wantState || !strings.Contains(detail, want) {
				t.Errorf("B after its stop: settled %v, %s (%q); want settled %v, %s with %q (A's partition %d, ends %v)",
					st.Settled, fs.State, detail, tc.wantSettled, wantState, want, pa, hwm)
			}
		})
	}
}

// produceTo writes n records to partition p of topic.
func produceTo(t *testing.T, c *kfake.Cluster, p int32, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Partition: p, Value: []byte("after")}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

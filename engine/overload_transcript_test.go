package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/blackbox-audit/blackbox/core"
	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/internal/testutil"
	"github.com/cockroachdb/datadriven"
)

// TestOverloadScenarios runs the overload scenarios in testdata/overload/:
// each drives one engine whose feed "in" has an overload policy, a queue
// size and groups with one turnstile processor each (closed unless listed
// in open), in a synctest bubble, and prints what publishing does and what
// the feed's status counts. `go test ./engine -run TestOverloadScenarios
// -rewrite` regenerates the expected output after a deliberate change: read
// the diff.
//
// Commands (g names a group):
//
//	engine policy=block queue=1 groups=(open,gated) [open=(open)] [deadline=30ms] [spin=0s] [window=4] [positioned]
//	                       start the engine (policy pause, drop or block; a DROP spins 0s unless spin says otherwise;
//	                       positioned: the feed gets a committer, as a source's does)
//	publish item=3         Publish: prints whether it was published or refused (and why), and how long it waited
//	try-publish at=6       one TryPublish at offset 6: prints whether it was taken
//	try-batch from=1 to=3  one TryPublishBatch of items from..to at those offsets: prints how many it took
//	entered g=a            how many items entered g's processor, once every goroutine is blocked
//	handled g=a            how many items g handled, once every goroutine is blocked
//	items g=a              the items g handled, in order, once every goroutine is blocked
//	let g=a n=1, open g=a  let n items through g's turnstile, or every item from now on
//	fence g=a, unfence g=a the Engine's
//	fail g=a               g's completions fail from now on (as a recorder that cannot write): g dies on its next item
//	engine-error           the engine's error, once every goroutine is blocked
//	status                 the feed's counters, and each subscriber's (those that are not 0 but its drops)
func TestOverloadScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/overload", func(t *testing.T, path string) {
		synctest.Test(t, func(t *testing.T) {
			r := &overloadRig{}
			datadriven.RunTest(t, path, r.run)
		})
	})
}

// overloadRig is one scenario's engine, feed and turnstiles; it is used by
// the scenario's goroutine only.
type overloadRig struct {
	e       *engine.Engine
	f       *engine.Feed
	gates   map[string]*turnstile
	failing atomic.Value // the name of the group whose completions fail, or ""
}

func (r *overloadRig) run(t *testing.T, d *datadriven.TestData) string {
	if d.Cmd == "engine" {
		return r.start(t, d)
	}
	if r.e == nil {
		d.Fatalf(t, "%s before engine", d.Cmd)
	}
	switch d.Cmd {
	case "publish":
		return r.publish(scanInt(t, d, "item"))
	case "try-publish":
		at := scanInt(t, d, "at")
		return fmt.Sprintf("taken %v\n", r.f.Intake().TryPublish(at, core.Position{Offset: int64(at)}))
	case "try-batch":
		var items []any
		var pos []core.Position
		for i := scanInt(t, d, "from"); i <= scanInt(t, d, "to"); i++ {
			items, pos = append(items, i), append(pos, core.Position{Offset: int64(i)})
		}
		return fmt.Sprintf("taken %d\n", r.f.Intake().TryPublishBatch(items, pos))
	case "entered", "handled", "items":
		synctest.Wait()
		g := r.gate(t, d)
		return map[string]func() string{
			"entered": func() string { return fmt.Sprintf("%d\n", g.enteredCount()) },
			"handled": func() string { return fmt.Sprintf("%d\n", g.count()) },
			"items":   func() string { return fmt.Sprintf("%v\n", g.items()) },
		}[d.Cmd]()
	case "let":
		r.gate(t, d).let(scanInt(t, d, "n"))
		return ""
	case "open":
		r.gate(t, d).openUp()
		return ""
	case "fence", "unfence":
		return r.fence(t, d)
	case "fail":
		r.gate(t, d) // the group exists
		r.failing.Store(scanString(t, d, "g"))
		return ""
	case "engine-error":
		synctest.Wait()
		return fmt.Sprintf("%v\n", r.e.Err())
	case "status":
		synctest.Wait()
		return overloadStatus(r.e.Status().Feeds[0])
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

// start starts the engine the "engine" command describes.
func (r *overloadRig) start(t *testing.T, d *datadriven.TestData) string {
	var kind, deadline, spin string
	var names, open []string
	d.ScanArgs(t, "policy", &kind)
	d.ScanArgs(t, "groups", &names)
	d.MaybeScanArgs(t, "open", &open)
	d.MaybeScanArgs(t, "deadline", &deadline)
	d.MaybeScanArgs(t, "spin", &spin)
	pol := overloadPolicy(t, d, kind, deadline, spin)
	feed := engine.FeedConfig{Name: "in", Policy: pol, QueueSize: scanInt(t, d, "queue")}
	d.MaybeScanArgs(t, "window", &feed.WindowCap)
	r.failing.Store("")
	r.gates = map[string]*turnstile{}
	cfg := engine.Config{DrainTimeout: 200 * time.Millisecond, Logger: testutil.Logger(t), Feeds: []engine.FeedConfig{feed},
		Observer: engine.Observer{BeforeComplete: func(group string, _ *engine.Input) error {
			if group == r.failing.Load() {
				return errors.New("disk full")
			}
			return nil
		}}}
	for _, n := range names {
		r.gates[n] = newTurnstile(false)
		cfg.Groups = append(cfg.Groups, engine.GroupConfig{Name: n, Feeds: []string{"in"}, Processors: procs("p-"+n, r.gates[n])})
	}
	for _, n := range open {
		r.gateNamed(t, d, n).openUp()
	}
	before, _ := testutil.CountGoroutines()
	e, err := engine.New(cfg)
	if err != nil {
		d.Fatalf(t, "New: %v", err)
	}
	if err := e.Start(context.Background()); err != nil {
		d.Fatalf(t, "Start: %v", err)
	}
	t.Cleanup(func() { r.stop(t, before) })
	r.e, r.f = e, e.Feed("in")
	if d.HasArg("positioned") {
		r.f.Intake().SetCommitter(&committer{})
	}
	return "started\n"
}

// stop opens every turnstile, stops the engine (a group that failed on
// purpose makes Stop report ErrObserver) and checks that no goroutine leaks.
func (r *overloadRig) stop(t *testing.T, before int) {
	for _, g := range r.gates {
		g.openUp()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.e.Stop(ctx); err != nil && !(r.failing.Load() != "" && errors.Is(err, engine.ErrObserver)) {
		t.Errorf("Stop: %v", err)
	}
	testutil.CheckNoLeak(t, before)
}

// overloadPolicy is the policy an "engine" command names.
func overloadPolicy(t *testing.T, d *datadriven.TestData, kind, deadline, spin string) engine.Policy {
	dur := func(s string) time.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		return v
	}
	k, err := engine.ParsePolicyKind(kind)
	if err != nil {
		d.Fatalf(t, "%v", err)
	}
	var pol engine.Policy
	switch k {
	case engine.PauseKind:
		pol = engine.Pause()
	case engine.DropAfterSpinKind:
		pol = engine.DropAfterSpin(0)
	case engine.BlockKind:
		pol = engine.BlockWithDeadline(dur(deadline))
	}
	if spin != "" {
		pol = pol.WithSpin(dur(spin))
	}
	return pol
}

// publish publishes item with Publish and says what became of it.
func (r *overloadRig) publish(item int) string {
	began := time.Now()
	err := r.f.Publish(context.Background(), item)
	waited := ""
	if w := time.Since(began); w > 0 {
		waited = fmt.Sprintf(" after %s", w)
	}
	var re *engine.RefusedError
	switch {
	case err == nil:
		return fmt.Sprintf("published %d%s\n", item, waited)
	case errors.As(err, &re) && errors.Is(err, engine.ErrRefused):
		return fmt.Sprintf("refused %d (%s)%s\n", item, re.Reason, waited)
	}
	return fmt.Sprintf("error: %v%s\n", err, waited)
}

func (r *overloadRig) fence(t *testing.T, d *datadriven.TestData) string {
	op := r.e.Fence
	if d.Cmd == "unfence" {
		op = r.e.Unfence
	}
	if err := op(scanString(t, d, "g")); err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	return ""
}

// gate is the turnstile of the group the argument g names.
func (r *overloadRig) gate(t *testing.T, d *datadriven.TestData) *turnstile {
	return r.gateNamed(t, d, scanString(t, d, "g"))
}

func (r *overloadRig) gateNamed(t *testing.T, d *datadriven.TestData, n string) *turnstile {
	g := r.gates[n]
	if g == nil {
		d.Fatalf(t, "no group %q", n)
	}
	return g
}

// overloadStatus prints a feed's overload counters and its subscribers'
// drops, and those of their other counters that are not 0: refusals,
// downgrades, blocked waits, pauses.
func overloadStatus(st engine.FeedStatus) string {
	var b strings.Builder
	fmt.Fprintf(&b, "sequence %d, dropped %d, refused %d, downgraded %d, pending acks %d, paused %v",
		st.Sequence, st.Dropped, st.Refused, st.Downgraded, st.PendingAcks, st.Paused)
	if st.Pauses > 0 {
		fmt.Fprintf(&b, " (pauses %d for %s)", st.Pauses, st.PausedTime)
	}
	fmt.Fprintf(&b, ", lossless %v\n", st.Lossless)
	for _, s := range st.Subscribers {
		fmt.Fprintf(&b, "  %s: dispatched %d, dropped %d", s.Queue, s.Dispatched, s.Dropped)
		for _, c := range []struct {
			name string
			n    int64
		}{{"refused", s.Refused}, {"downgraded", s.Downgraded}} {
			if c.n > 0 {
				fmt.Fprintf(&b, ", %s %d", c.name, c.n)
			}
		}
		if s.Blocked > 0 {
			fmt.Fprintf(&b, ", blocked %d for %s (longest %s)", s.Blocked, s.BlockedTime, s.BlockedMax)
		}
		if s.Pauses > 0 {
			fmt.Fprintf(&b, ", paused %v (pauses %d for %s)", s.Paused, s.Pauses, s.PausedTime)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func scanInt(t *testing.T, d *datadriven.TestData, key string) int {
	var v int
	d.ScanArgs(t, key, &v)
	return v
}

func scanString(t *testing.T, d *datadriven.TestData, key string) string {
	var v string
	d.ScanArgs(t, key, &v)
	return v
}

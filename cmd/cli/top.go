package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/engine"
)

// topClock is top's clock: the time of a scrape and the wait for the next.
type topClock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type systemTopClock struct{}

func (systemTopClock) Now() time.Time                         { return time.Now().UTC() }
func (systemTopClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// clearScreen moves the cursor home and clears the screen (ANSI).
const clearScreen = "\033[H\033[2J"

func (c *CLI) topCmd() *cobra.Command {
	var (
		once, plain       bool
		interval, timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "top ADDR",
		Short: "Watch a running run through its operator window (run --listen): rates, lag, gap, losses, pauses",
		Long: `Watch a running run through its operator window (run --listen ADDR; ADDR
is HOST:PORT or http[s]://HOST:PORT[/PREFIX]): every --interval it reads
/status, /readyz and /bindings and shows, per feed, group and binding:

  FEED     the source's state, items read and their rate, the sequence
           committed and its rate (0 on a feed without source positions),
           uncommitted (items read and not committed: the lag),
           backpressure pauses (now, count, time), readiness, LOST (dropped,
           refused, failed, completion failures, the source's losses) and
           SKIPPED (released or skipped by an operator: intended) apart
  BINDING  a group's queue of a feed: policy, queued (published to it, not
           taken), items taken and their rate, loss state (UP, DEGRADED,
           LATCHED), the operator's fence (paused until, fenced), dropped,
           refused and released items
  GROUP    workers, items in flight, gap against its bound, time blocked at
           the bound, stale tokens, stalled workers

A rate is the difference of two successive readings over the time between
them ("-" on the first frame, and when a counter went backwards: a new run).
On a terminal each frame redraws the screen (an ANSI clear); --plain, or
an output that is not a terminal, writes frames one after another as plain
text. A window that cannot be read shows as such, and top keeps trying.
Ctrl-C ends it.

--once prints one frame and exits, for scripts: it reads the window twice,
--interval apart, so that the frame has its rates (--interval 0: once,
rates "-").

Exit: 0 when stopped (or, with --once, a frame printed); 2 a usage error;
3 with --once, the window could not be read (unreachable, no answer, or an
answer outside its contract: the message names ADDR and the HTTP status).`,
		Args: exactArgs("ADDR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if interval < 0 || (!once && interval == 0) {
				return usagef("--interval %s: want a positive duration (0 only with --once)", interval)
			}
			if timeout <= 0 {
				return usagef("--timeout %s: want a positive duration", timeout)
			}
			client, err := console.NewClient(args[0], console.ClientOptions{Timeout: timeout})
			if err != nil {
				return UsageError(err)
			}
			t := &top{client: client, clock: c.topClock, interval: interval, out: cmd.OutOrStdout(),
				redraw: !plain && c.isStdoutTerminal()}
			if t.clock == nil {
				t.clock = systemTopClock{}
			}
			if once {
				return t.once(cmd.Context())
			}
			return t.run(cmd.Context())
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&once, "once", false, "print one frame and exit")
	fl.BoolVar(&plain, "plain", false, "plain text: never clear the screen")
	fl.DurationVar(&interval, "interval", time.Second, "the time between two readings")
	fl.DurationVar(&timeout, "timeout", 5*time.Second, "each request's timeout")
	return cmd
}

// isStdoutTerminal reports whether the CLI's stdout is a terminal.
func (c *CLI) isStdoutTerminal() bool {
	if c.stdoutTerminal != nil {
		return *c.stdoutTerminal
	}
	f, ok := c.stdout.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// top reads a window and draws its frames. Not safe for concurrent use.
type top struct {
	client   *console.Client
	clock    topClock
	interval time.Duration
	out      io.Writer
	redraw   bool
	frames   int // drawn so far
}

// topSample is one reading of the window.
type topSample struct {
	at       time.Time
	status   engine.Status
	ready    console.Readiness
	bindings []console.Binding
	err      error // the first endpoint that could not be read
}

// scrape reads the window.
func (t *top) scrape(ctx context.Context) topSample {
	s := topSample{at: t.clock.Now()}
	if s.status, s.err = t.client.Status(ctx); s.err != nil {
		return s
	}
	if s.ready, s.err = t.client.Readiness(ctx); s.err != nil {
		return s
	}
	s.bindings, s.err = t.client.Bindings(ctx)
	return s
}

// wait waits the interval; false when ctx ended first.
func (t *top) wait(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-t.clock.After(t.interval):
		return true
	}
}

func (t *top) once(ctx context.Context) error {
	cur := t.scrape(ctx)
	var prev *topSample
	if cur.err == nil && t.interval > 0 {
		if !t.wait(ctx) {
			return exit(ExitIncomplete, ctx.Err())
		}
		first := cur
		prev, cur = &first, t.scrape(ctx)
	}
	if cur.err != nil {
		return exit(ExitIncomplete, cur.err)
	}
	return t.draw(prev, cur)
}

func (t *top) run(ctx context.Context) error {
	var prev *topSample
	for {
		cur := t.scrape(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := t.draw(prev, cur); err != nil {
			return err
		}
		if cur.err == nil {
			prev = &cur
		}
		if !t.wait(ctx) {
			return nil
		}
	}
}

// draw writes one frame, in one write.
func (t *top) draw(prev *topSample, cur topSample) error {
	var b strings.Builder
	if t.redraw {
		b.WriteString(clearScreen)
	} else if t.frames > 0 {
		b.WriteString("\n")
	}
	t.frames++
	renderTop(&b, t.client.Addr(), prev, cur)
	_, err := io.WriteString(t.out, b.String())
	return err
}

// renderTop writes a frame: cur, with rates against prev (nil: none).
func renderTop(w io.Writer, addr string, prev *topSample, cur topSample) {
	fmt.Fprintf(w, "blackbox top %s at %s", addr, cur.at.UTC().Format(time.RFC3339))
	if prev != nil {
		fmt.Fprintf(w, ", rates over %s", cur.at.Sub(prev.at))
	}
	fmt.Fprintln(w)
	if cur.err != nil {
		fmt.Fprintf(w, "cannot read the window: %v\n", cur.err)
		return
	}
	st, r := cur.status, cur.ready
	ready := "yes"
	if !r.Ready {
		ready = "no"
	}
	fmt.Fprintf(w, "ready     %s: %s", ready, r.State)
	if r.Reason != "" {
		fmt.Fprintf(w, " (%s)", r.Reason)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "run       settled %s, lossless %s", yesNo(st.Settled), yesNo(st.Lossless))
	if st.Killed != "" {
		fmt.Fprintf(w, ", killed: %s", st.Killed)
	}
	fmt.Fprintln(w)

	var before map[string]engine.FeedStatus
	var dt time.Duration
	if prev != nil {
		dt = cur.at.Sub(prev.at)
		before = map[string]engine.FeedStatus{}
		for _, f := range prev.status.Feeds {
			before[f.Feed] = f
		}
	}
	rate := func(now, then int64, had bool) string {
		if !had || dt <= 0 || now < then {
			return "-"
		}
		return fmt.Sprintf("%.1f", float64(now-then)/dt.Seconds())
	}
	feedReady := map[string]console.FeedReadiness{}
	for _, f := range r.Feeds {
		feedReady[f.Feed] = f
	}

	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FEED\tSTATE\tREAD\tREAD/s\tCOMMITTED\tCOMMIT/s\tUNCOMMITTED\tPAUSED\tREADY\tLOST\tSKIPPED")
	for _, f := range st.Feeds {
		b, had := before[f.Feed]
		paused := "no"
		if f.Paused {
			paused = "yes"
		}
		paused += fmt.Sprintf(" (%d, %s)", f.Pauses, roundDuration(f.PausedTime))
		rd := "-"
		if fr, ok := feedReady[f.Feed]; ok {
			rd = yesNo(fr.Ready)
			if !fr.Ready {
				rd += ": " + fr.State
			}
		}
		lost, _ := feedLosses(f)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%d\t%s\t%s\t%d\t%d\n", f.Feed, f.State, f.Sequence, rate(f.Sequence, b.Sequence, had),
			f.Acknowledged, rate(f.Acknowledged, b.Acknowledged, had), f.PendingAcks, paused, rd, lost, f.Released)
	}
	tw.Flush()

	type subKey struct{ feed, queue string }
	subBefore := map[subKey]engine.SubscriberStatus{}
	if prev != nil {
		for _, f := range prev.status.Feeds {
			for _, s := range f.Subscribers {
				if !s.Removed {
					subBefore[subKey{f.Feed, s.Queue}] = s
				}
			}
		}
	}
	operator := map[string]console.Binding{}
	for _, b := range cur.bindings {
		operator[b.Group+"/"+b.Feed] = b
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "BINDING\tPOLICY\tQUEUED\tTAKEN\tTAKEN/s\tLOSS\tOPERATOR\tDROPPED\tREFUSED\tRELEASED")
	for _, f := range st.Feeds {
		for _, s := range f.Subscribers {
			if s.Removed {
				continue
			}
			b, had := subBefore[subKey{f.Feed, s.Queue}]
			loss := string(s.Loss.State)
			if loss == "" {
				loss = string(engine.LossUp)
			}
			op := "-"
			if ob, ok := operator[s.Queue]; ok && ob.Fenced {
				op = "fenced"
				if ob.PausedUntil != nil {
					op = "paused until " + ob.PausedUntil.UTC().Format(time.RFC3339)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\n", s.Queue, s.Policy, s.Position-s.Dispatched, s.Dispatched,
				rate(s.Dispatched, b.Dispatched, had), loss, op, s.Dropped, s.Refused, s.Released)
		}
	}
	tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tWORKERS\tIN FLIGHT\tGAP\tGAP BLOCKED\tSTALE\tSTALLED")
	for _, g := range st.Groups {
		gap := "-"
		if g.MaxGap > 0 {
			gap = fmt.Sprintf("%d/%d", g.Gap, g.MaxGap)
		}
		stalled := "-"
		if g.Stalled != nil {
			stalled = *g.Stalled
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%d\t%s\n", g.Group, g.Workers, g.InFlight, gap, roundDuration(g.GapBlocked), g.StaleTokens, stalled)
	}
	tw.Flush()

	fmt.Fprintln(w)
	fmt.Fprintln(w, "losses, apart from the operator's skips:")
	for _, f := range st.Feeds {
		lost, reasons := feedLosses(f)
		line := "none"
		if lost > 0 {
			line = strings.Join(reasons, ", ")
		}
		fmt.Fprintf(w, "  %s: %s; skipped by the operator: %d", f.Feed, line, f.Released)
		if f.Stalled != nil {
			fmt.Fprintf(w, "; stalled: %s", *f.Stalled)
		}
		fmt.Fprintln(w)
	}
}

// feedLosses is a feed's losses (not the operator's skips) and their
// reasons, "reason count", the nonzero ones.
func feedLosses(f engine.FeedStatus) (int64, []string) {
	var total int64
	var reasons []string
	add := func(name string, n int64) {
		if n > 0 {
			total += n
			reasons = append(reasons, fmt.Sprintf("%s %d", name, n))
		}
	}
	add("dropped", f.Dropped)
	add("refused", f.Refused)
	add("failed", f.Failures)
	add("completion failed", f.CompletionFailures)
	names := make([]string, 0, len(f.Losses))
	for n := range f.Losses {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		add(n, f.Losses[n])
	}
	return total, reasons
}

// roundDuration rounds d for a frame: to the millisecond under a second,
// else to a tenth of a second.
func roundDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(100 * time.Millisecond).String()
}

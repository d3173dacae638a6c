package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/blackbox-audit/blackbox/console"
	"github.com/blackbox-audit/blackbox/core"
)

// ctlFlags are ctl's flags.
type ctlFlags struct {
	feed, group, reason, until  string
	indefinite, latest, abandon bool
	generation, to              int64
	tokenFile, tokenName        string
	yes, asJSON                 bool
	timeout                     time.Duration
}

// ctlActions are the actions ctl knows, in the order its help names them.
var ctlActions = []console.Action{console.ActionPause, console.ActionResume, console.ActionClear,
	console.ActionRelease, console.ActionSeek, console.ActionKill}

func (c *CLI) ctlCmd() *cobra.Command {
	var f ctlFlags
	cmd := &cobra.Command{
		Use:   "ctl ADDR pause|resume|clear|release|seek|kill",
		Short: "Act on a running run through its operator window (run --listen): print the plan, then apply it",
		Long: `Send one control action to the operator window of a running run (run
--listen ADDR; ADDR is HOST:PORT or http[s]://HOST:PORT[/PREFIX]), with a
token of --token-file (lines NAME TOKEN, as the run's --control-token-file;
--token-name picks one, default the first). The window records each action
with the token's name, the time, the reason, and the positions before and
after.

  pause    --group G (--until DUR|TIME | --indefinite): fence the group;
           --until is a duration from now (this machine's clock) or an
           RFC 3339 time; --indefinite only when asked
  resume   --group G [--feed F [--generation N]]: unfence the group
  clear    --feed F --group G: clear the binding's loss state (a latch)
  release  --feed F --group G [--generation N]: release what the group's
           fenced or dead queue holds of the feed (a recorded loss)
  seek     --feed F --group G (--to SEQ | --latest) [--generation N]: move
           the fenced group's position forwards (a recorded loss)
  kill     [--abandon]: kill the run, letting in-flight items finish (--abandon: abandon
           them; refused unless the run was started to abandon them)

--reason is required. release and seek read the binding's generation from
the window (GET /bindings) unless --generation gives it: the window refuses
the action if the generation changed since. seek first asks for a dry run
and prints its plan (the position before and after, the items it skips,
loss and redelivery); the apply carries the plan's hash, and the window
refuses it (409) if the plan changed since.

ctl prints the plan first, then applies it only with --yes, or after a
"y" at a prompt when standard input is a terminal. Not a terminal and no
--yes: it prints the plan and exits 1 without applying anything.

Exit: 0 applied; 1 not applied (no --yes, or declined at the prompt); 2 a
usage error, or the window refused (400 bad request, 401 token, 404 unknown
feed, group or action, 409 stale generation or plan, 422 refused by the
engine, 503 the run is stopping): nothing was done; 3 unknown: the window
was unreachable (nothing was sent), or gave no answer or one outside its
contract (for an apply, whether it was done is unknown: read the window's
/bindings or blackbox top ADDR).`,
		Args: exactArgs("ADDR", "ACTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return c.ctl(cmd.Context(), cmd, args[0], console.Action(args[1]), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.feed, "feed", "", "the feed (clear, release, seek; pause and resume: optional)")
	fl.StringVar(&f.group, "group", "", "the group (every action but kill)")
	fl.StringVar(&f.reason, "reason", "", "why (required): recorded with the action")
	fl.StringVar(&f.until, "until", "", "pause: until a duration from now (10m) or an RFC 3339 time")
	fl.BoolVar(&f.indefinite, "indefinite", false, "pause: until resumed")
	fl.Int64Var(&f.generation, "generation", 0, "release, seek, resume: the binding's generation (default: read from the window)")
	fl.Int64Var(&f.to, "to", 0, "seek: the feed sequence the group is done through after the seek")
	fl.BoolVar(&f.latest, "latest", false, "seek: past everything the group's queue holds")
	fl.BoolVar(&f.abandon, "abandon", false, "kill: abandon the items in flight instead of letting them finish (refused by a run that lets them finish, as blackbox run does)")
	fl.StringVar(&f.tokenFile, "token-file", "", "the token file: lines NAME TOKEN (required)")
	fl.StringVar(&f.tokenName, "token-name", "", "the token's NAME in --token-file (default: the first)")
	fl.BoolVar(&f.yes, "yes", false, "apply the plan without asking")
	fl.BoolVar(&f.asJSON, "json", false, "print the binding, the plan and the answer as JSON")
	fl.DurationVar(&f.timeout, "timeout", console.DefaultClientTimeout, "each request's timeout")
	return cmd
}

// ctlReport is what ctl did (--json).
type ctlReport struct {
	Window  string           `json:"window"`
	Action  console.Action   `json:"action"`
	Request console.Request  `json:"request"`
	Binding *console.Binding `json:"binding"` // read for release and seek
	Plan    *console.Answer  `json:"plan"`    // seek's dry run
	Answer  *console.Answer  `json:"answer"`  // the apply's (or its refusal's)
	Applied bool             `json:"applied"`
	Error   string           `json:"error,omitempty"`
}

func (c *CLI) ctl(ctx context.Context, cmd *cobra.Command, addr string, action console.Action, f ctlFlags) error {
	now := c.clock
	if now == nil {
		now = core.SystemClock()
	}
	req, err := ctlRequest(action, f, cmd.Flags().Changed, now.Now())
	if err != nil {
		return err
	}
	if f.tokenFile == "" {
		return usagef("ctl needs --token-file: every control action needs a token")
	}
	_, token, err := readToken(f.tokenFile, f.tokenName)
	if err != nil {
		return err
	}
	if f.timeout <= 0 {
		return usagef("--timeout %s: want a positive duration", f.timeout)
	}
	client, err := console.NewClient(addr, console.ClientOptions{Token: token, Timeout: f.timeout})
	if err != nil {
		return UsageError(err)
	}
	rep := &ctlReport{Window: addr, Action: action, Request: req}
	out := cmd.OutOrStdout()
	// With --json the plan goes to standard error, and only when asking.
	plan := out
	if f.asJSON {
		plan = io.Discard
	}
	ask := !f.yes && c.interactive()
	if f.asJSON && ask {
		plan = c.stderr
	}
	failed := func(err error) error {
		if f.asJSON {
			rep.Error = err.Error()
			if werr := WriteJSON(out, rep); werr != nil {
				return werr
			}
		}
		return err
	}

	if (action == console.ActionRelease || action == console.ActionSeek) && !cmd.Flags().Changed("generation") {
		b, err := ctlBinding(ctx, client, req.Feed, req.Group)
		if err != nil {
			return failed(ctlExit(err, false))
		}
		rep.Binding, rep.Request.Generation, req.Generation = &b, b.Generation, b.Generation
	}
	if action == console.ActionSeek {
		dry, err := client.Control(ctx, action, req)
		if err != nil {
			return failed(ctlExit(err, false))
		}
		if dry.Plan == nil || dry.PlanHash == "" || dry.Applied {
			return failed(exit(ExitIncomplete, fmt.Errorf("%s: the seek's dry run gave no plan (or applied it): an answer outside the window's contract", addr)))
		}
		rep.Plan = &dry
	}
	writePlan(plan, rep, f)
	if !f.yes {
		why := "give --yes to apply (standard input is not a terminal)"
		if ask {
			ok, err := c.confirm(ctx, addr)
			if err != nil {
				return failed(err)
			}
			why = "declined"
			if ok {
				why = ""
			}
		}
		if why != "" {
			if f.asJSON {
				fmt.Fprintln(c.stderr, "not applied: "+why)
				if err := WriteJSON(out, rep); err != nil {
					return err
				}
			} else {
				fmt.Fprintln(out, "not applied: "+why)
			}
			return exit(ExitDifferent, nil)
		}
	}
	if rep.Plan != nil {
		req.PlanHash = rep.Plan.PlanHash
		rep.Request.PlanHash = req.PlanHash
	}
	a, err := client.Control(ctx, action, req)
	if err != nil {
		var he *console.HTTPError
		if errors.As(err, &he) && he.Answer != nil {
			rep.Answer = he.Answer
		}
		return failed(ctlExit(err, true))
	}
	rep.Answer = &a
	if !a.Applied {
		return failed(exit(ExitIncomplete, fmt.Errorf("%s: %s answered 200 but not applied: an answer outside the window's contract", addr, action)))
	}
	rep.Applied = true
	if f.asJSON {
		return WriteJSON(out, rep)
	}
	who := a.Who
	if who == "" {
		who = "?"
	}
	fmt.Fprintf(out, "applied   %s by %s", a.At.UTC().Format(time.RFC3339Nano), who)
	if a.Before != 0 || a.After != 0 {
		fmt.Fprintf(out, ": position %d -> %d", a.Before, a.After)
	}
	fmt.Fprintln(out)
	return nil
}

// ctlRequest checks the flags against the action and builds its request:
// a flag the action does not use is a usage error, not ignored.
func ctlRequest(action console.Action, f ctlFlags, changed func(string) bool, now time.Time) (console.Request, error) {
	if !slices.Contains(ctlActions, action) {
		return console.Request{}, usagef("unknown action %q (known: pause, resume, clear, release, seek, kill)", action)
	}
	if strings.TrimSpace(f.reason) == "" {
		return console.Request{}, usagef("ctl %s needs --reason: it is recorded with the action", action)
	}
	type use struct{ need, may []string }
	uses := map[console.Action]use{
		console.ActionPause:   {need: []string{"group"}, may: []string{"feed", "until", "indefinite"}},
		console.ActionResume:  {need: []string{"group"}, may: []string{"feed", "generation"}},
		console.ActionClear:   {need: []string{"feed", "group"}},
		console.ActionRelease: {need: []string{"feed", "group"}, may: []string{"generation"}},
		console.ActionSeek:    {need: []string{"feed", "group"}, may: []string{"generation", "to", "latest"}},
		console.ActionKill:    {may: []string{"abandon"}},
	}[action]
	for _, n := range uses.need {
		if !changed(n) {
			return console.Request{}, usagef("ctl %s needs --%s", action, n)
		}
	}
	for _, n := range []string{"feed", "group", "until", "indefinite", "generation", "to", "latest", "abandon"} {
		if changed(n) && !slices.Contains(uses.need, n) && !slices.Contains(uses.may, n) {
			return console.Request{}, usagef("ctl %s takes no --%s", action, n)
		}
	}
	req := console.Request{Feed: f.feed, Group: f.group, Reason: f.reason, Indefinite: f.indefinite,
		Generation: f.generation, To: f.to, Latest: f.latest, Finish: action == console.ActionKill && !f.abandon}
	if (changed("feed") && f.feed == "") || (changed("group") && f.group == "") {
		return console.Request{}, usagef("ctl %s: --feed and --group want a name", action)
	}
	if changed("generation") && f.generation <= 0 {
		return console.Request{}, usagef("--generation %d: want a generation read from the window (1 or more)", f.generation)
	}
	if action == console.ActionResume && changed("generation") && !changed("feed") {
		return console.Request{}, usagef("ctl resume --generation needs --feed: a generation names a binding to one feed")
	}
	switch action {
	case console.ActionPause:
		if changed("until") == f.indefinite {
			return console.Request{}, usagef("ctl pause needs --until DUR|TIME or --indefinite (one of them)")
		}
		if changed("until") {
			t, err := untilTime(f.until, now)
			if err != nil {
				return console.Request{}, err
			}
			req.Until = &t
		}
	case console.ActionSeek:
		if changed("to") == f.latest {
			return console.Request{}, usagef("ctl seek needs --to SEQ or --latest (one of them)")
		}
		if changed("to") && f.to <= 0 {
			return console.Request{}, usagef("--to %d: want a feed sequence (1 or more)", f.to)
		}
	}
	return req, nil
}

// untilTime reads --until: a duration from now, or an RFC 3339 time,
// which must be after now.
func untilTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d <= 0 {
			return time.Time{}, usagef("--until %s: want a positive duration", s)
		}
		return now.Add(d).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, usagef("--until %q: want a duration (10m) or an RFC 3339 time (2030-01-01T12:00:00Z)", s)
	}
	if !t.After(now) {
		return time.Time{}, usagef("--until %s is not after now (%s)", s, now.UTC().Format(time.RFC3339))
	}
	return t.UTC(), nil
}

// readToken reads a token file (lines NAME TOKEN; blank lines and lines
// beginning with # are skipped) and returns the token named name, or the
// first. An error never quotes a token.
func readToken(path, name string) (tokenName, token string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("--token-file: %w", err)
	}
	var names []string
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return "", "", fmt.Errorf("%s:%d: --token-file: want NAME TOKEN, got %d fields", path, i+1, len(fields))
		}
		if slices.Contains(names, fields[0]) {
			return "", "", fmt.Errorf("%s:%d: --token-file: the name %q is given twice", path, i+1, fields[0])
		}
		names = append(names, fields[0])
		if token == "" && (name == "" || name == fields[0]) {
			tokenName, token = fields[0], fields[1]
		}
	}
	switch {
	case len(names) == 0:
		return "", "", fmt.Errorf("%s: --token-file: no token (want lines NAME TOKEN)", path)
	case token == "":
		return "", "", usagef("--token-name %q: %s has no such name (it has %s)", name, path, strings.Join(names, ", "))
	}
	return tokenName, token, nil
}

// ctlBinding reads the window's binding of group to feed.
func ctlBinding(ctx context.Context, client *console.Client, feed, group string) (console.Binding, error) {
	bs, err := client.Bindings(ctx)
	if err != nil {
		return console.Binding{}, err
	}
	var found []console.Binding
	for _, b := range bs {
		if b.Feed == feed && b.Group == group {
			found = append(found, b)
		}
	}
	switch len(found) {
	case 0:
		return console.Binding{}, exit(ExitFailure, fmt.Errorf("%s: no binding of group %q to feed %q (GET %s lists %d)",
			client.Addr(), group, feed, console.PathBindings, len(bs)))
	case 1:
		return found[0], nil
	}
	return console.Binding{}, exit(ExitFailure, fmt.Errorf("%s: %d bindings of group %q to feed %q: give --generation",
		client.Addr(), len(found), group, feed))
}

// ctlExit maps a client error to ctl's exit: 2 a refusal (nothing was
// done), 3 unknown. applying says the request was the apply itself: its
// outcome is unknown without an answer.
func ctlExit(err error, applying bool) error {
	var ee *ExitError
	var he *console.HTTPError
	switch {
	case errors.As(err, &ee):
		return err
	case errors.Is(err, console.ErrUnreachable):
		return exit(ExitIncomplete, fmt.Errorf("%w (nothing was sent)", err))
	case errors.As(err, &he) && !errors.Is(err, console.ErrUnexpected):
		return exit(ExitFailure, fmt.Errorf("%w (refused: nothing was done)", err))
	case applying:
		return exit(ExitIncomplete, fmt.Errorf("%w (whether it was applied is unknown: read the window's %s)", err, console.PathBindings))
	}
	return exit(ExitIncomplete, fmt.Errorf("%w (nothing was applied)", err))
}

// writePlan prints what ctl is about to do.
func writePlan(w io.Writer, rep *ctlReport, f ctlFlags) {
	req := rep.Request
	fmt.Fprintf(w, "window    %s\n", rep.Window)
	var what string
	switch rep.Action {
	case console.ActionPause:
		until := "indefinitely (until resumed)"
		if req.Until != nil {
			until = "until " + req.Until.Format(time.RFC3339)
		}
		what = fmt.Sprintf("fence group %s %s", req.Group, until)
	case console.ActionResume:
		what = "unfence group " + req.Group
	case console.ActionClear:
		what = fmt.Sprintf("clear the loss state of group %s on feed %s", req.Group, req.Feed)
	case console.ActionRelease:
		what = fmt.Sprintf("release what group %s's queue of generation %d holds of feed %s: a loss, recorded", req.Group, req.Generation, req.Feed)
	case console.ActionSeek:
		what = fmt.Sprintf("move group %s's position on feed %s to %s", req.Group, req.Feed, seekTarget(req))
	case console.ActionKill:
		what = "kill the run, abandoning the items in flight"
		if req.Finish {
			what = "kill the run, letting the items in flight finish"
		}
	}
	fmt.Fprintf(w, "action    %s: %s\n", rep.Action, what)
	if b := rep.Binding; b != nil {
		fenced := "not fenced"
		if b.Fenced {
			fenced = "fenced"
		}
		if b.PausedUntil != nil {
			fenced += " until " + b.PausedUntil.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "binding   %s/%s generation %d, position %d, %s, loss state %s\n", b.Group, b.Feed, b.Generation, b.Position, fenced, b.LossState)
	}
	if rep.Plan != nil && rep.Plan.Plan != nil {
		p := rep.Plan.Plan
		fmt.Fprintf(w, "plan      position %d -> %d: ", p.Before, p.After)
		if p.Loss {
			fmt.Fprintf(w, "skips seqs %d-%d (%d unprocessed, %d processed): a loss, recorded", p.FirstSeq, p.LastSeq, p.Unprocessed, p.Processed)
		} else {
			fmt.Fprint(w, "skips nothing")
		}
		if p.Redelivery {
			fmt.Fprintf(w, "; moves the group back: delivers seqs %d-%d again (%d items, under new seqs), to it only\n", p.FirstSeq, p.LastSeq, p.LastSeq-p.FirstSeq+1)
		} else {
			fmt.Fprintln(w, "; no redelivery")
		}
		fmt.Fprintf(w, "hash      %s\n", rep.Plan.PlanHash)
	}
	fmt.Fprintf(w, "reason    %s\n", f.reason)
}

func seekTarget(req console.Request) string {
	if req.Latest {
		return "the latest (past everything its queue holds)"
	}
	return fmt.Sprintf("seq %d", req.To)
}

// interactive reports whether ctl may ask: standard input is a terminal.
func (c *CLI) interactive() bool {
	if c.stdinTerminal != nil {
		return *c.stdinTerminal
	}
	f, ok := c.stdin.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// confirm asks on standard error and reads the answer from standard
// input: "y" or "yes" (any case) is yes, anything else (an end of input,
// an interrupt: ctx ended) no. The read goes on in its goroutine after
// an interrupt, blocked on the terminal until the process exits: a read
// of a terminal cannot be cancelled.
func (c *CLI) confirm(ctx context.Context, addr string) (bool, error) {
	fmt.Fprintf(c.stderr, "apply this to %s? [y/N] ", addr)
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(c.stdin).ReadString('\n')
		got <- answer{line, err}
	}()
	select {
	case <-ctx.Done():
		fmt.Fprintln(c.stderr)
		return false, nil
	case a := <-got:
		if a.err != nil && !errors.Is(a.err, io.EOF) {
			return false, fmt.Errorf("reading the answer: %w", a.err)
		}
		s := strings.ToLower(strings.TrimSpace(a.line))
		return s == "y" || s == "yes", nil
	}
}

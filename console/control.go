package console

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blackbox-audit/blackbox/engine"
	"github.com/blackbox-audit/blackbox/store"
)

// Operator is the name a CONTROL row gives the window itself: the end of
// a pause at its deadline.
const Operator = "console"

// maxBody bounds a control request's body.
const maxBody = 64 << 10

// errAnswer is a refusal with its HTTP status.
type errAnswer struct {
	code int
	err  error
}

func (e *errAnswer) Error() string { return e.err.Error() }

func refuse(code int, format string, args ...any) *errAnswer {
	return &errAnswer{code, fmt.Errorf(format, args...)}
}

// control serves POST /control/{action}: the token first (401), then the
// action (404), the request (400), then the engine's answer.
func (w *Window) control(rw http.ResponseWriter, r *http.Request) {
	action := Action(r.PathValue("action"))
	ans := Answer{Action: action, At: w.cfg.Clock.Now()}
	auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	who := ""
	if ok {
		who = w.cfg.Tokens.who(auth)
	}
	if who == "" {
		rw.Header().Set("WWW-Authenticate", `Bearer realm="blackbox"`)
		ans.Error = "no or unknown token"
		writeJSON(rw, http.StatusUnauthorized, ans)
		return
	}
	ans.Who = who
	var req Request
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	switch {
	case !known(action):
		err = refuse(http.StatusNotFound, "unknown action %q", action)
	case err != nil:
		err = refuse(http.StatusBadRequest, "request: %v", err)
	case strings.TrimSpace(req.Reason) == "":
		err = refuse(http.StatusBadRequest, "a reason is required (it is recorded)")
	case action != ActionKill && req.Group == "":
		err = refuse(http.StatusBadRequest, "%s needs a group", action)
	case action != ActionKill && req.Feed == "":
		// pause and resume fence a group: the feed only names the
		// positions the answer and the row report, the group's one feed
		// when it reads one. The other actions act on a binding.
		req.Feed, err = w.onlyFeed(action, req.Group)
	}
	switch {
	case err != nil:
	case w.isDraining():
		err = refuse(http.StatusServiceUnavailable, "the run is stopping: it takes no operator action")
	default:
		w.act.Lock()
		w.endPauses(w.cfg.Clock.Now())
		ans, err = w.do(action, who, req)
		ans.Who = who
		w.act.Unlock()
	}
	code := http.StatusOK
	if err != nil {
		code, ans.Error = codeOf(err), err.Error()
		w.cfg.Logger.Warn("console: control refused", "action", string(action), "who", who,
			"feed", req.Feed, "group", req.Group, "err", err)
	}
	writeJSON(rw, code, ans)
}

// isDraining reports whether Drain was called.
func (w *Window) isDraining() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.draining
}

// known reports whether a is one of the six actions.
func known(a Action) bool {
	switch a {
	case ActionPause, ActionResume, ActionClear, ActionRelease, ActionSeek, ActionKill:
		return true
	}
	return false
}

// codeOf is the HTTP status of a refusal (Answer's doc).
func codeOf(err error) int {
	var ea *errAnswer
	switch {
	case errors.As(err, &ea):
		return ea.code
	case errors.Is(err, engine.ErrUnknown):
		return http.StatusNotFound
	case errors.Is(err, engine.ErrGeneration):
		return http.StatusConflict
	case errors.Is(err, engine.ErrNotRecorded):
		return http.StatusInternalServerError // not done: it could not be recorded
	case errors.Is(err, engine.ErrStopped), errors.Is(err, engine.ErrNotStarted):
		return http.StatusServiceUnavailable
	}
	return http.StatusUnprocessableEntity // the engine refused: ErrNotLatched, ErrNotHeld, ErrNotFenced ...
}

// do acts (w.act held) and records the action: the answer is Applied once
// the engine acted, and an error then says the row could not be written.
func (w *Window) do(action Action, who string, req Request) (Answer, error) {
	eng := w.cfg.Engine
	now := w.cfg.Clock.Now()
	ans := Answer{Action: action, Who: who, At: now}
	row := store.Control{Action: string(action), Who: who, Reason: req.Reason, At: now}
	if action != ActionKill { // a kill is the run's: no binding
		row.Feed, row.Group = req.Feed, req.Group
		before, err := w.position(req.Feed, req.Group)
		if err != nil {
			return ans, err
		}
		row.Before, row.After = before, before
	}
	var pausedUntil *time.Time // the pause to note once it is recorded
	switch action {
	case ActionPause:
		until, err := w.pauseEnd(req, now)
		if err != nil {
			return ans, err
		}
		if err := eng.Fence(req.Group); err != nil {
			return ans, err
		}
		row.Until, pausedUntil = until, &until
	case ActionResume:
		var err error
		if req.Generation != 0 {
			err = eng.Resume(req.Feed, req.Group, req.Generation)
		} else {
			err = eng.Unfence(req.Group)
		}
		if err != nil {
			return ans, err
		}
		w.mu.Lock()
		delete(w.paused, req.Group)
		w.mu.Unlock()
	case ActionClear:
		if err := eng.ClearOverload(req.Feed, req.Group, req.Reason); err != nil {
			return ans, err
		}
	case ActionRelease:
		if req.Generation == 0 {
			return ans, refuse(http.StatusBadRequest, "release needs the binding's generation (GET %s)", PathBindings)
		}
		// As a seek's, the release's CONTROL row is the engine's
		// observer's, written before it takes effect, with this operator
		// and instant; the answer's positions are the row's.
		rel, err := eng.ReleaseWith(req.Feed, req.Group, req.Generation, engine.ReleaseOptions{Reason: req.Reason, Who: who, At: now})
		if err != nil {
			return ans, err
		}
		row.Before, row.After = rel.Before, rel.After
		w.replaced(rel.Replacement, row.After)
	case ActionSeek:
		plan, hash, err := w.seekPlan(req)
		if err != nil {
			return ans, err
		}
		ans.Plan, ans.PlanHash, ans.Before, ans.After = plan, hash, plan.Before, plan.After
		if req.PlanHash == "" {
			return ans, nil // a dry run: nothing done, nothing recorded
		}
		if req.PlanHash != hash {
			return ans, refuse(http.StatusConflict, "the plan changed since it was read (hash %s, now %s): read it again", req.PlanHash, hash)
		}
		// The engine's observer (the recorder) writes the seek's CONTROL
		// row itself, before the seek takes effect (Observer.Acted), with
		// this operator and instant: the window writes none of its own.
		if w.beforeSeek != nil {
			w.beforeSeek()
		}
		done, err := eng.Seek(req.Feed, req.Group, req.Generation, target(req), engine.SeekOptions{Reason: req.Reason, Who: who, At: now})
		if err != nil {
			return ans, err
		}
		// The answer's plan is the one the engine applied and recorded:
		// items in flight while the group is paused may complete between
		// the plan named by the hash and the seek, and the rows count
		// what the seek took, not what the plan read before it.
		ans.Plan = planOf(done)
		ans.PlanHash = PlanHash(*ans.Plan)
		// The answer's positions are the row's, which the engine's
		// observer wrote: before is the group's completed prefix at the
		// seek (SeekPlan.Done: the plan's Before stops at the first item
		// still holding the commit, completed and not yet durable), after
		// SeekPlan.Recorded; a move back (a re-delivery) is recorded as
		// one: its after below its before.
		row.Before, row.After = done.Done, done.Recorded()
		begins := done.After // the feed sequence the new queue begins after
		if done.Redelivery {
			// Its items are the ones read again, under the seqs after the
			// feed's last at the seek: its position counts from there.
			begins = done.LastSeq
		}
		w.replaced(done.Replacement, begins)
	case ActionKill:
		if req.Finish == w.cfg.KillAbandon {
			return ans, refuse(http.StatusUnprocessableEntity, "this run's kill %s the items in flight: ask with finish %t",
				map[bool]string{true: "abandons", false: "lets finish"}[w.cfg.KillAbandon], !w.cfg.KillAbandon)
		}
		// Recorded before it takes effect, under the engine's lock once
		// the kill is certain: a kill ends the run, which closes its
		// recording, and a row written after it found the recorder closed
		// (torture seed 1796286182059162061). A row that cannot be
		// written refuses the kill (500, engine.ErrNotRecorded), as a
		// seek's or a release's does: not done.
		if err := eng.KillRecorded(req.Reason, func() error { return w.cfg.Audit.Control(row) }); err != nil {
			return ans, err
		}
	}
	if action != ActionRelease && action != ActionSeek && action != ActionKill {
		after, err := w.position(req.Feed, req.Group)
		if err == nil {
			row.After = after
		}
	}
	ans.Applied, ans.Before, ans.After = true, row.Before, row.After
	if pausedUntil != nil {
		w.mu.Lock()
		w.paused[req.Group] = *pausedUntil
		w.mu.Unlock()
	}
	if action == ActionSeek || action == ActionRelease || action == ActionKill {
		return ans, nil // recorded before it took effect (a seek's and a release's by the engine's observer)
	}
	if err := w.cfg.Audit.Control(row); err != nil {
		w.cfg.Logger.Error("console: an operator's action was done but not recorded", "action", string(action), "who", who, "err", err)
		return ans, refuse(http.StatusInternalServerError, "done, but not recorded: %v", err)
	}
	return ans, nil
}

// replaced notes the queue of generation gen (0: none) that a release or
// a seek put in place, its items following feed sequence after: its
// binding's position counts from there.
func (w *Window) replaced(gen, after int64) {
	if gen == 0 {
		return
	}
	w.mu.Lock()
	w.base[gen] = after
	w.mu.Unlock()
}

// queuePosition is a queue's binding position: the feed sequence its group is
// done through, counted from where the queue began (a queue a release or
// a seek put in place does not begin at 0).
func (w *Window) queuePosition(s engine.SubscriberStatus) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.base[s.Generation] + s.Dispatched
}

// pauseEnd is the deadline of a pause: Until, in the future, or the zero
// time for Indefinite; one of them, not both.
func (w *Window) pauseEnd(req Request, now time.Time) (time.Time, error) {
	switch {
	case req.Until != nil && req.Indefinite:
		return time.Time{}, refuse(http.StatusBadRequest, "pause: until and indefinite both given")
	case req.Indefinite:
		return time.Time{}, nil
	case req.Until == nil:
		return time.Time{}, refuse(http.StatusBadRequest, "pause needs until (or indefinite)")
	case !req.Until.After(now):
		return time.Time{}, refuse(http.StatusBadRequest, "pause until %s: not after now (%s)", req.Until.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return req.Until.UTC(), nil
}

// seekPlan is the engine's dry run of req's seek, on the wire, and its
// hash.
func (w *Window) seekPlan(req Request) (*Plan, string, error) {
	switch {
	case req.Generation == 0:
		return nil, "", refuse(http.StatusBadRequest, "seek needs the binding's generation (GET %s)", PathBindings)
	case req.Latest == (req.To > 0):
		return nil, "", refuse(http.StatusBadRequest, "seek needs a target: to (a feed sequence) or latest, one of them")
	}
	p, err := w.cfg.Engine.Seek(req.Feed, req.Group, req.Generation, target(req), engine.SeekOptions{DryRun: true, Reason: req.Reason})
	if err != nil {
		return nil, "", err
	}
	plan := planOf(p)
	return plan, PlanHash(*plan), nil
}

// planOf is the wire form of the engine's seek plan.
func planOf(p engine.SeekPlan) *Plan {
	return &Plan{Feed: p.Feed, Group: p.Group, Generation: p.Generation, Before: p.Before, After: p.After, Loss: p.Loss,
		Redelivery: p.Redelivery, Unprocessed: p.Unprocessed, Processed: p.Processed, FirstSeq: p.FirstSeq, LastSeq: p.LastSeq}
}

// PlanHash names a seek's plan: the hex SHA-256 of its JSON (the
// generation included), so an apply that names it is refused once the
// positions or the generation moved.
func PlanHash(p Plan) string {
	b, err := json.Marshal(p)
	if err != nil { // integers, strings and booleans
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func target(req Request) engine.SeekTarget {
	return engine.SeekTarget{Seq: req.To, Latest: req.Latest}
}

// position is the feed sequence through which group completed the items
// of feed (its live queue's Dispatched, from where the queue began);
// ErrUnknown for a binding that does
// not exist.
func (w *Window) position(feed, group string) (int64, error) {
	for _, b := range w.liveBindings(w.cfg.Engine.Status()) {
		if b.Feed == feed && b.Group == group {
			return b.Position, nil
		}
	}
	return 0, fmt.Errorf("%w: feed %q group %q", engine.ErrUnknown, feed, group)
}

// endPauses unfences the groups whose pause ended by now, each recorded as
// a resume by Operator (w.act held).
func (w *Window) endPauses(now time.Time) {
	w.mu.Lock()
	var due []string
	for g, until := range w.paused {
		if !until.IsZero() && !now.Before(until) {
			due = append(due, g)
			delete(w.paused, g)
		}
	}
	w.mu.Unlock()
	for _, g := range due {
		if err := w.cfg.Engine.Unfence(g); err != nil {
			w.cfg.Logger.Warn("console: the end of a pause", "group", g, "err", err)
			continue
		}
		if w.cfg.Audit == nil {
			continue
		}
		for _, b := range w.liveBindings(w.cfg.Engine.Status()) {
			if b.Group != g {
				continue
			}
			row := store.Control{Feed: b.Feed, Group: g, Action: string(ActionResume), Who: Operator,
				Reason: "the pause ended (its deadline passed)", At: now, Before: b.Position, After: b.Position}
			if err := w.cfg.Audit.Control(row); err != nil {
				w.cfg.Logger.Error("console: the end of a pause was not recorded", "group", g, "err", err)
			}
		}
	}
}

// onlyFeed is the feed of group's one live binding, for a pause or a
// resume that names no feed; 400 for another action, or a group that reads
// no feed or several.
func (w *Window) onlyFeed(action Action, group string) (string, error) {
	if action != ActionPause && action != ActionResume {
		return "", refuse(http.StatusBadRequest, "%s needs a feed and a group", action)
	}
	var feeds []string
	for _, b := range w.liveBindings(w.cfg.Engine.Status()) {
		if b.Group == group {
			feeds = append(feeds, b.Feed)
		}
	}
	if len(feeds) != 1 {
		return "", refuse(http.StatusBadRequest, "%s: group %q reads %d feeds: name one", action, group, len(feeds))
	}
	return feeds[0], nil
}

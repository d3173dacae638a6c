package consoletest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blackbox-audit/blackbox/console"
)

// Received is a control request the window got, and the HTTP status it
// answered.
type Received struct {
	Action  console.Action
	Request console.Request
	Who     string // the token's name, "" when the token was refused
	Code    int
}

// Applied reports whether the window did the action (a 200 that was not a
// dry run).
func (r Received) Applied() bool {
	return r.Code == http.StatusOK && (r.Action != console.ActionSeek || r.Request.PlanHash != "")
}

// binding is a console.Binding and the items its queue holds past its
// position (what a release or a seek skips).
type binding struct {
	console.Binding
	held int64
}

// Window is the fake window: an http.Handler. Safe for concurrent use.
type Window struct {
	mu       sync.Mutex
	now      func() time.Time
	tokens   map[string]string // token -> name
	bindings []*binding
	heads    map[string]int64 // feed -> its last sequence
	nextGen  int64
	status   [][]byte
	scrapes  int
	ready    console.Readiness
	stopping bool
	received []Received
	after    func(Received)
}

// New returns a window on the clock now, knowing tokens (token -> name),
// with no binding, no status and ready.
func New(now func() time.Time, tokens map[string]string) *Window {
	return &Window{now: now, tokens: tokens, heads: map[string]int64{}, nextGen: 100,
		ready: console.Readiness{Ready: true, State: "running", Feeds: []console.FeedReadiness{}}}
}

// AddBinding adds a binding (LossState "" reads UP) whose queue holds
// held items past its position, on a feed whose last sequence is head.
func (w *Window) AddBinding(b console.Binding, held, head int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b.LossState == "" {
		b.LossState = "UP"
	}
	w.bindings = append(w.bindings, &binding{Binding: b, held: held})
	w.heads[b.Feed] = max(w.heads[b.Feed], head)
}

// Bindings returns the bindings now.
func (w *Window) Bindings() []console.Binding {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]console.Binding, len(w.bindings))
	for i, b := range w.bindings {
		out[i] = b.Binding
	}
	return out
}

// Move moves a binding's position by n (its group went on, or another
// operator acted): a plan made before is stale.
func (w *Window) Move(feed, group string, n int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if b := w.find(feed, group); b != nil {
		b.Position += n
		w.heads[feed] = max(w.heads[feed], b.Position+b.held)
	}
}

// SetStatus sets the /status bodies: each GET gets the next, the last
// one again and again.
func (w *Window) SetStatus(bodies ...[]byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status, w.scrapes = bodies, 0
}

// SetReadiness sets /readyz's answer (503 when not r.Ready).
func (w *Window) SetReadiness(r console.Readiness) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ready = r
}

// SetStopping makes every control action 503, as a run that is stopping.
func (w *Window) SetStopping() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopping = true
}

// AfterControl sets a function called after each control request was
// answered (outside the window's lock: it may call the window).
func (w *Window) AfterControl(f func(Received)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.after = f
}

// Received returns the control requests received, in order.
func (w *Window) Received() []Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.received)
}

// ServeHTTP answers the window's paths.
func (w *Window) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if action, ok := strings.CutPrefix(r.URL.Path, console.PathControl); ok {
		if r.Method != http.MethodPost {
			http.Error(rw, "POST only", http.StatusMethodNotAllowed)
			return
		}
		w.control(rw, r, console.Action(action))
		return
	}
	if r.Method != http.MethodGet {
		http.Error(rw, "GET only", http.StatusMethodNotAllowed)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch r.URL.Path {
	case console.PathStatus:
		if len(w.status) == 0 {
			http.Error(rw, "no status", http.StatusNotFound)
			return
		}
		body := w.status[min(w.scrapes, len(w.status)-1)]
		w.scrapes++
		rw.Header().Set("Content-Type", "application/json")
		_, _ = rw.Write(body)
	case console.PathBindings:
		out := []console.Binding{}
		for _, b := range w.bindings {
			out = append(out, b.Binding)
		}
		writeJSON(rw, http.StatusOK, out)
	case console.PathReadyz:
		code := http.StatusOK
		if !w.ready.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(rw, code, w.ready)
	case console.PathLivez:
		rw.WriteHeader(http.StatusOK)
	default:
		http.NotFound(rw, r)
	}
}

// control answers POST /control/ACTION.
func (w *Window) control(rw http.ResponseWriter, r *http.Request, action console.Action) {
	w.mu.Lock()
	rec := Received{Action: action}
	a, code := w.act(r, &rec)
	rec.Code = code
	w.received = append(w.received, rec)
	after := w.after
	w.mu.Unlock()
	if code != http.StatusOK {
		a.Applied, a.Plan, a.PlanHash = false, nil, ""
	}
	writeJSON(rw, code, a)
	if after != nil {
		after(rec)
	}
}

// act does the action; w.mu held.
func (w *Window) act(r *http.Request, rec *Received) (console.Answer, int) {
	a := console.Answer{Action: rec.Action, At: w.now()}
	fail := func(code int, format string, args ...any) (console.Answer, int) {
		a.Error = fmt.Sprintf(format, args...)
		return a, code
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	name, known := w.tokens[token]
	if !ok || !known {
		return fail(http.StatusUnauthorized, "no or unknown token")
	}
	rec.Who, a.Who = name, name
	switch rec.Action {
	case console.ActionPause, console.ActionResume, console.ActionClear, console.ActionRelease, console.ActionSeek, console.ActionKill:
	default:
		return fail(http.StatusNotFound, "unknown action %q", rec.Action)
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec.Request); err != nil {
		return fail(http.StatusBadRequest, "the request: %v", err)
	}
	req := rec.Request
	if req.Reason == "" {
		return fail(http.StatusBadRequest, "a reason is required")
	}
	if w.stopping {
		return fail(http.StatusServiceUnavailable, "the run is stopping")
	}
	var b *binding
	switch rec.Action {
	case console.ActionPause, console.ActionResume:
		if !w.hasGroup(req.Group) {
			return fail(http.StatusNotFound, "unknown group %q", req.Group)
		}
		if req.Feed != "" {
			if b = w.find(req.Feed, req.Group); b == nil {
				return fail(http.StatusNotFound, "group %q has no binding to feed %q", req.Group, req.Feed)
			}
		}
	case console.ActionClear, console.ActionRelease, console.ActionSeek:
		if b = w.find(req.Feed, req.Group); b == nil {
			return fail(http.StatusNotFound, "group %q has no binding to feed %q", req.Group, req.Feed)
		}
	}
	if b != nil {
		a.Before, a.After = b.Position, b.Position
	}
	switch rec.Action {
	case console.ActionPause:
		if (req.Until == nil) == !req.Indefinite {
			return fail(http.StatusBadRequest, "a pause needs until or indefinite, not both")
		}
		if req.Until != nil && !req.Until.After(w.now()) {
			return fail(http.StatusBadRequest, "until %s is past", req.Until.Format(time.RFC3339))
		}
		for _, g := range w.group(req.Group) {
			g.Fenced, g.PausedUntil = true, req.Until
		}
	case console.ActionResume:
		if b != nil && req.Generation != 0 && req.Generation != b.Generation {
			return fail(http.StatusConflict, "generation %d is stale: the binding's is %d", req.Generation, b.Generation)
		}
		for _, g := range w.group(req.Group) {
			g.Fenced, g.PausedUntil = false, nil
		}
	case console.ActionClear:
		b.LossState = "UP"
	case console.ActionRelease:
		if req.Generation != b.Generation {
			return fail(http.StatusConflict, "generation %d is stale: the binding's is %d", req.Generation, b.Generation)
		}
		if !b.Fenced || b.held == 0 {
			return fail(http.StatusUnprocessableEntity, "engine: the queue holds nothing to release")
		}
		b.Position += b.held
		b.held, b.Generation = 0, w.gen()
		a.After = b.Position
	case console.ActionSeek:
		if req.Generation != b.Generation {
			return fail(http.StatusConflict, "generation %d is stale: the binding's is %d", req.Generation, b.Generation)
		}
		if !b.Fenced {
			return fail(http.StatusUnprocessableEntity, "engine: the group is not fenced")
		}
		p, err := w.plan(b, req)
		if err != nil {
			return fail(http.StatusUnprocessableEntity, "engine: seek not supported: %v", err)
		}
		hash := Hash(p)
		if req.PlanHash == "" {
			a.Plan, a.PlanHash, a.After = &p, hash, p.After
			return a, http.StatusOK
		}
		if req.PlanHash != hash {
			return fail(http.StatusConflict, "the plan changed since the dry run")
		}
		b.Position, b.held, b.Generation = p.After, 0, w.gen()
		a.Plan, a.PlanHash, a.After = &p, hash, p.After
	case console.ActionKill:
		w.stopping = true
		w.ready = console.Readiness{Ready: false, State: "killed", Reason: req.Reason, Feeds: w.ready.Feeds}
	}
	a.Applied = true
	return a, http.StatusOK
}

// plan is a seek's plan, by the engine's rules (engine.Seek): forwards
// only, at or past what the queue holds, not past the feed's last
// sequence.
func (w *Window) plan(b *binding, req console.Request) (console.Plan, error) {
	p := console.Plan{Feed: b.Feed, Group: b.Group, Generation: b.Generation, Before: b.Position}
	held := b.Position + b.held
	switch {
	case req.Latest:
		p.After = held
	case req.To < b.Position:
		return p, fmt.Errorf("seq %d is before the position %d", req.To, b.Position)
	case req.To < held:
		return p, fmt.Errorf("seq %d is within what the queue holds (through %d)", req.To, held)
	case req.To > w.heads[b.Feed]:
		return p, fmt.Errorf("seq %d is past the feed's last %d", req.To, w.heads[b.Feed])
	default:
		p.After = req.To
	}
	if b.held > 0 {
		p.Loss, p.Unprocessed, p.FirstSeq, p.LastSeq = true, b.held, b.Position+1, held
	}
	return p, nil
}

// Hash is the fake's plan hash: SHA-256 of the plan's JSON.
func Hash(p console.Plan) string {
	j, err := json.Marshal(p)
	if err != nil {
		panic(err) // a plain struct of strings, integers and booleans
	}
	sum := sha256.Sum256(j)
	return hex.EncodeToString(sum[:])
}

func (w *Window) gen() int64 {
	w.nextGen++
	return w.nextGen
}

func (w *Window) find(feed, group string) *binding {
	for _, b := range w.bindings {
		if b.Feed == feed && b.Group == group {
			return b
		}
	}
	return nil
}

func (w *Window) group(group string) []*binding {
	var out []*binding
	for _, b := range w.bindings {
		if b.Group == group {
			out = append(out, b)
		}
	}
	return out
}

func (w *Window) hasGroup(group string) bool { return len(w.group(group)) > 0 }

func writeJSON(rw http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(code)
	_, _ = rw.Write(buf.Bytes())
}

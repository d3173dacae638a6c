package console

import "time"

// The wire contract of a run's operator window (run --listen): the control
// endpoints' requests and answers, as JSON. blackbox ctl and blackbox top
// are clients of it; docs/OPERATIONS.md documents it. Changing a field's
// JSON name is a breaking change.

// Paths served by the window (each on the window's own http.ServeMux).
const (
	PathMetrics  = "/metrics"  // Prometheus exposition (GET)
	PathLivez    = "/livez"    // the run loop's heartbeat (GET): 200 or 503
	PathReadyz   = "/readyz"   // readiness (GET): 200 or 503, body Readiness
	PathStatus   = "/status"   // the engine's status JSON, as run --status writes it (GET)
	PathBindings = "/bindings" // the bindings an operator can act on (GET): []Binding
	PathControl  = "/control/" // + an Action (POST): body Request, answer Answer
)

// Action names a control endpoint: POST PathControl + Action.
type Action string

// The control actions.
const (
	ActionPause   Action = "pause"   // fence a group until Request.Until (or indefinitely with Request.Indefinite)
	ActionResume  Action = "resume"  // unfence a group (after a pause or a seek)
	ActionClear   Action = "clear"   // clear a latched binding's loss state (Engine.ClearOverload)
	ActionRelease Action = "release" // release a held binding (Engine.Release), needs Generation
	ActionSeek    Action = "seek"    // plan (DryRun, the default) or apply (PlanHash) a seek (Engine.Seek)
	ActionKill    Action = "kill"    // kill the run (Engine.Kill)
)

// Request is the body of every control POST. The token goes in the
// Authorization header ("Bearer TOKEN"), never in the body.
type Request struct {
	Feed   string `json:"feed,omitempty"`
	Group  string `json:"group,omitempty"`
	Reason string `json:"reason"` // required, recorded
	// Until ends a pause (RFC 3339); a pause needs Until or Indefinite.
	Until      *time.Time `json:"until,omitempty"`
	Indefinite bool       `json:"indefinite,omitempty"`
	// Generation is the binding's generation the operator read
	// (Binding.Generation): release and seek are compare-and-swap on it.
	Generation int64 `json:"generation,omitempty"`
	// Seek's target: a feed sequence (To) or Latest.
	To     int64 `json:"to,omitempty"`
	Latest bool  `json:"latest,omitempty"`
	// A seek is a dry run unless PlanHash is given: the Answer.PlanHash of
	// a dry run; refused (409) when the plan it hashes changed since.
	PlanHash string `json:"planHash,omitempty"`
	// Kill: let in-flight items finish (false: abandon them).
	Finish bool `json:"finish,omitempty"`
}

// Answer is the body of every control answer. HTTP status: 200 done (or
// planned, for a dry run), 400 a bad request, 401 no or unknown token, 404
// an unknown feed, group or action, 409 a stale generation or plan, 422
// refused by the engine (Error says why), 503 the run is stopping.
type Answer struct {
	Action  Action `json:"action"`
	Applied bool   `json:"applied"` // false for a dry run or an error
	// Who is the token's name; At the instant the window acted (the run's
	// clock); both as recorded.
	Who string    `json:"who,omitempty"`
	At  time.Time `json:"at"`
	// Before and After are the binding's positions (feed sequences the
	// group is done through) around the action; 0 when not applicable.
	Before int64 `json:"before,omitempty"`
	After  int64 `json:"after,omitempty"`
	// Plan is a seek's plan; PlanHash names it for the apply. An applied
	// seek answers the plan the engine applied and recorded, which may
	// differ from the dry run its request named by the items in flight
	// that completed in between (its hash then differs too).
	Plan     *Plan  `json:"plan,omitempty"`
	PlanHash string `json:"planHash,omitempty"`
	Error    string `json:"error,omitempty"`
}

// Plan is a seek's plan (engine.SeekPlan on the wire).
type Plan struct {
	Feed        string `json:"feed"`
	Group       string `json:"group"`
	Generation  int64  `json:"generation"`
	Before      int64  `json:"before"`
	After       int64  `json:"after"`
	Loss        bool   `json:"loss"`
	Redelivery  bool   `json:"redelivery"`
	Unprocessed int64  `json:"unprocessed"`
	Processed   int64  `json:"processed"`
	FirstSeq    int64  `json:"firstSeq"`
	LastSeq     int64  `json:"lastSeq"`
}

// Binding is one group's binding to a feed as the operator acts on it.
type Binding struct {
	Feed       string `json:"feed"`
	Group      string `json:"group"`
	Generation int64  `json:"generation"`
	Position   int64  `json:"position"`
	Fenced     bool   `json:"fenced"`
	// PausedUntil is set while an operator pause with a deadline holds.
	PausedUntil *time.Time `json:"pausedUntil,omitempty"`
	LossState   string     `json:"lossState"`
	// MoveBack is "pending" from a seek back of the group until its
	// source applied it, "failed" while the source failed to
	// (engine.SubscriberStatus.MoveBack); omitted otherwise.
	MoveBack string `json:"moveBack,omitempty"`
}

// Readiness is /readyz's body.
type Readiness struct {
	Ready bool `json:"ready"`
	// State is "starting", "running", "draining", "latched", "killed" or
	// "unreachable" (a Kafka broker); Reason says why it is not ready.
	State  string          `json:"state"`
	Reason string          `json:"reason,omitempty"`
	Feeds  []FeedReadiness `json:"feeds"`
}

// FeedReadiness is one feed's part of Readiness.
type FeedReadiness struct {
	Feed   string `json:"feed"`
	Ready  bool   `json:"ready"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}
